# Kafka protocol on 9092. Every log node listens on it (SASL/PLAIN with an API key, since the
# nodes check keys); the load balancer forwards 9092 to them. Clients outside the VPC cannot
# reach task addresses, so Metadata names the advertised listener (by default this load
# balancer's 9092) as the only broker, and a node that is not a group's coordinator forwards
# the group's requests to it over 9092.

variable "kafka_advertised_listener" {
  description = "host:port Kafka Metadata names as the only broker (a load balancer in front of every log node); null: this module's load balancer on 9092; \"\": none (Metadata names the log nodes' own addresses, for clients inside the VPC)."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_advertised_listener == null || can(regex("^([^:/ ]+:[0-9]{1,5})?$", var.kafka_advertised_listener))
    error_message = "kafka_advertised_listener must be host:port, or \"\" for none."
  }
}

locals {
  kafka_port                = 9092
  kafka_advertised_listener = var.kafka_advertised_listener == null ? "${aws_lb.lognode.dns_name}:${local.kafka_port}" : var.kafka_advertised_listener
}

resource "aws_lb_target_group" "lognode_kafka" {
  name                 = "${var.name}-kafka"
  port                 = local.kafka_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  deregistration_delay = 75
  tags                 = local.tags

  health_check {
    protocol            = "HTTP"
    port                = tostring(local.http_port)
    path                = "/healthz"
    matcher             = "200"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_listener" "lognode_kafka" {
  load_balancer_arn = aws_lb.lognode.arn
  port              = local.kafka_port
  protocol          = "TCP"
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.lognode_kafka.arn
  }
}

resource "aws_vpc_security_group_ingress_rule" "lognode_kafka_from_nlb" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Kafka protocol from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  referenced_security_group_id = aws_security_group.nlb.id
}

resource "aws_vpc_security_group_ingress_rule" "lognode_kafka_from_lognode" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Kafka group requests forwarded to their coordinator"
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  referenced_security_group_id = aws_security_group.lognode.id
}

resource "aws_vpc_security_group_ingress_rule" "nlb_kafka_from_cidr" {
  for_each = toset(local.client_cidr_blocks)

  security_group_id = aws_security_group.nlb.id
  description       = "Kafka protocol from clients in ${each.value}"
  ip_protocol       = "tcp"
  from_port         = local.kafka_port
  to_port           = local.kafka_port
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "nlb_kafka_from_sg" {
  for_each = toset(var.client_security_group_ids)

  security_group_id            = aws_security_group.nlb.id
  description                  = "Kafka protocol from client security group ${each.value}"
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  referenced_security_group_id = each.value
}

resource "aws_vpc_security_group_egress_rule" "nlb_to_lognode_kafka" {
  security_group_id            = aws_security_group.nlb.id
  description                  = "Kafka protocol to the log nodes"
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  referenced_security_group_id = aws_security_group.lognode.id
}

resource "aws_vpc_security_group_egress_rule" "lognode_to_lognode_kafka" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Kafka group requests forwarded to their coordinator"
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  referenced_security_group_id = aws_security_group.lognode.id
}

output "kafka_bootstrap" {
  description = "Kafka bootstrap address (the load balancer's 9092)."
  value       = "${aws_lb.lognode.dns_name}:${local.kafka_port}"
}
