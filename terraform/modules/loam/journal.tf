# The quorum class's journals (docs/quorum.md): the log nodes that are members of a journal
# speak Raft to each other on the journal port (7101), and any log node forwards quorum
# produces to the journal leader's node on the same port. The port is for log nodes only:
# it is not on the load balancer. The module opens it between log nodes; it does not start
# them with a journal (--journal-addr, --journal-dir) yet: a member's Raft log needs a disk
# that outlives its task, which these Fargate tasks do not have, so class quorum stays off in
# this module.

resource "aws_vpc_security_group_ingress_rule" "lognode_journal_from_lognode" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Journal Raft and forwarded quorum produces from log nodes"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_internal_ports["journal"]
  to_port                      = local.lognode_internal_ports["journal"]
  referenced_security_group_id = aws_security_group.lognode.id
}

resource "aws_vpc_security_group_egress_rule" "lognode_to_lognode_journal" {
  security_group_id            = aws_security_group.lognode.id
  description                  = "Journal Raft and forwarded quorum produces to log nodes"
  ip_protocol                  = "tcp"
  from_port                    = local.lognode_internal_ports["journal"]
  to_port                      = local.lognode_internal_ports["journal"]
  referenced_security_group_id = aws_security_group.lognode.id
}
