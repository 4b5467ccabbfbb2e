# Kafka protocol on 9092 (an entry of local.lognode_ports: its listener, target group and
# security group rules come with the other ports'). Every log node listens on it (SASL/PLAIN
# with an API key, since the nodes check keys). Clients outside the VPC cannot reach task
# addresses, so Metadata names the advertised listener (by default this load balancer's
# 9092) as the only broker, and a node that is not a group's coordinator forwards the group's
# requests to it over 9092: the log nodes reach each other's 9092.

locals {
  kafka_advertised_listener = var.kafka_advertised_listener == null ? "${aws_lb.lognode.dns_name}:${local.lognode_ports["kafka"]}" : var.kafka_advertised_listener
}

resource "aws_vpc_security_group_ingress_rule" "lognode_kafka_from_lognode" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Kafka group requests forwarded to their coordinator"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_ports["kafka"]
  to_port                      = local.lognode_ports["kafka"]
  referenced_security_group_id = aws_security_group.lognode.id
}

resource "aws_vpc_security_group_egress_rule" "lognode_to_lognode_kafka" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Kafka group requests forwarded to their coordinator"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_ports["kafka"]
  to_port                      = local.lognode_ports["kafka"]
  referenced_security_group_id = aws_security_group.lognode.id
}
