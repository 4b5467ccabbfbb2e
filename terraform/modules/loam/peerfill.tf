# Zone peers' tail caches (docs/read-path.md, "Zone peers"): a log node sends the chunks it
# commits to the other log nodes of its zone, found in the node registry, on their peer
# port (7080). The port is for log nodes only: it is not on the load balancer. With the
# cluster identity (cluster_identity), the peer listener requires a client certificate of
# the cluster CA.

locals {
  # Ports the log nodes serve to each other only (not on the load balancer).
  lognode_internal_ports = { peer = 7080, journal = 7101 } # journal: journal.tf
  peer_lognode_environment = {
    LOAM_PEER_ADDR = "0.0.0.0:${local.lognode_internal_ports["peer"]}" # advertised at the task's own address
  }
}

resource "aws_vpc_security_group_ingress_rule" "lognode_peer_from_lognode" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Tail-cache fills from zone peers"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_internal_ports["peer"]
  to_port                      = local.lognode_internal_ports["peer"]
  referenced_security_group_id = aws_security_group.lognode.id
}

resource "aws_vpc_security_group_egress_rule" "lognode_to_lognode_peer" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Tail-cache fills to zone peers"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_internal_ports["peer"]
  to_port                      = local.lognode_internal_ports["peer"]
  referenced_security_group_id = aws_security_group.lognode.id
}
