# The sequencer: a Raft group of var.sequencer_voters EC2 instances, one per zone. Each voter
# owns three things that outlive its instance:
#   - a network interface, whose private address is the voter's Raft and RPC address (the peer
#     list and LOAM_SEQUENCER are built from these addresses, so they never change);
#   - an EBS volume in the voter's zone (Raft log + bbolt state), mounted at /var/lib/loam;
#   - its Raft server ID (seq-1, seq-2, ...).
# Replacing an instance (a new AMI, a lost host) therefore brings the same voter back with its
# data, and the cluster keeps quorum as long as one voter is replaced at a time.

resource "aws_network_interface" "sequencer" {
  for_each = local.sequencer_voters

  subnet_id       = each.value.subnet_id
  private_ips     = length(var.sequencer_private_ips) > 0 ? [var.sequencer_private_ips[each.value.index]] : null
  security_groups = [aws_security_group.sequencer.id]
  description     = "Loam sequencer voter ${each.key}: stable Raft and RPC address"
  tags            = merge(local.tags, { Name = "${var.name}-${each.key}" })

  lifecycle {
    precondition {
      condition     = data.aws_subnet.this[each.value.zone].availability_zone == each.value.zone
      error_message = "subnet_ids[\"${each.value.zone}\"] lies in zone ${data.aws_subnet.this[each.value.zone].availability_zone}: key every subnet by its own zone."
    }

    precondition {
      condition     = data.aws_subnet.this[each.value.zone].vpc_id == var.vpc_id
      error_message = "subnet_ids[\"${each.value.zone}\"] is not in vpc_id."
    }
  }
}

resource "aws_ebs_volume" "sequencer" {
  for_each = local.sequencer_voters

  availability_zone = each.value.zone
  size              = var.sequencer_volume_size_gib
  type              = "gp3"
  encrypted         = true
  # Destroying a voter's volume destroys its copy of the metastore: keep a snapshot.
  final_snapshot = true
  tags           = merge(local.tags, { Name = "${var.name}-${each.key}-data" })
}

resource "aws_instance" "sequencer" {
  for_each = local.sequencer_voters

  ami                  = local.sequencer_ami_id
  instance_type        = var.sequencer_instance_type
  iam_instance_profile = aws_iam_instance_profile.sequencer.name

  primary_network_interface {
    network_interface_id = aws_network_interface.sequencer[each.key].id
  }

  user_data = templatefile("${path.module}/templates/sequencer-user-data.sh.tftpl", {
    voter_id      = each.key
    rpc_addr      = "${aws_network_interface.sequencer[each.key].private_ip}:${local.rpc_port}"
    raft_addr     = "${aws_network_interface.sequencer[each.key].private_ip}:${local.raft_port}"
    bootstrap     = each.value.index == 0
    peers         = each.value.index == 0 ? local.sequencer_bootstrap_peers : ""
    image         = var.sequencer_image
    ecr_registry  = lookup(local.ecr_registries, "sequencer", "")
    region        = local.region
    log_group     = aws_cloudwatch_log_group.sequencer.name
    volume_id     = aws_ebs_volume.sequencer[each.key].id
    volume_serial = replace(aws_ebs_volume.sequencer[each.key].id, "-", "")
    uid           = local.container_uid
    # The voter's Leader metric (embedded metric format on stdout, shipped by awslogs).
    metric_namespace = local.metric_namespace
    deployment       = var.name
    # The leader backs the state machine up to the data bucket (backups/sequencer/).
    backup_bucket   = local.bucket_url
    backup_interval = var.sequencer_backup_interval
    # The cluster identity, fetched from Secrets Manager before every start (identity.tf).
    identity_secret_arn = local.identity_enabled ? local.identity_secret_arn : ""
    server_name         = local.identity_server == null ? "" : local.identity_server
  })

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = 20
    encrypted   = true
    # Tags here, not volume_tags: volume_tags would fight the data volume's own tags.
    tags = merge(local.tags, { Name = "${var.name}-${each.key}-root" })
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}", "loam:raft-id" = each.key })

  lifecycle {
    # Replacing every voter in one apply would stop the whole Raft group at once. A newer
    # Amazon Linux release or a new sequencer_image therefore changes nothing in place (user
    # data runs only at first boot anyway); roll the voters one at a time instead, waiting for
    # each to rejoin: terraform apply -replace='module.loam.aws_instance.sequencer["seq-1"]'.
    ignore_changes = [ami, user_data]

    precondition {
      condition     = contains(data.aws_ec2_instance_type.sequencer.supported_architectures, var.architecture)
      error_message = "sequencer_instance_type ${var.sequencer_instance_type} does not run ${var.architecture}; pick an instance type of that architecture or change architecture."
    }
  }
}

resource "aws_volume_attachment" "sequencer" {
  for_each = local.sequencer_voters

  device_name = "/dev/sdf"
  volume_id   = aws_ebs_volume.sequencer[each.key].id
  instance_id = aws_instance.sequencer[each.key].id
  # Stop the instance (and with it the sequencer) before detaching its data volume.
  stop_instance_before_detaching = true
}
