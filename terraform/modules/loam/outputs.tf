output "bucket_name" {
  description = "Name of the data bucket (log nodes open it as s3://NAME)."
  value       = aws_s3_bucket.data.bucket
}

output "bucket_arn" {
  description = "ARN of the data bucket."
  value       = aws_s3_bucket.data.arn
}

output "bucket_url" {
  description = "The bucket URL the log nodes get as LOAM_BUCKET."
  value       = local.bucket_url
}

output "table_name" {
  description = "Name of the DynamoDB coordination table."
  value       = aws_dynamodb_table.coord.name
}

output "table_arn" {
  description = "ARN of the DynamoDB coordination table."
  value       = aws_dynamodb_table.coord.arn
}

output "queue_arn" {
  description = "ARN of the SQS queue that receives the bucket's wal/ object-created notifications (the segmenter's event source)."
  value       = aws_sqs_queue.wal_events.arn
}

output "queue_url" {
  description = "URL of the wal/ object-created notification queue."
  value       = aws_sqs_queue.wal_events.id
}

output "dead_letter_queue_arn" {
  description = "ARN of the dead-letter queue behind the notification queue."
  value       = aws_sqs_queue.wal_events_dlq.arn
}

output "http_endpoint" {
  description = "Native HTTP API of the log nodes through the internal load balancer."
  value       = "http://${aws_lb.lognode.dns_name}:${local.http_port}"
}

output "load_balancer_dns_name" {
  description = "DNS name of the internal load balancer; <zone>.<name> resolves to that zone's address only."
  value       = aws_lb.lognode.dns_name
}

output "sequencer_addresses" {
  description = "Sequencer RPC addresses (host:7070), the log nodes' LOAM_SEQUENCER."
  value       = local.sequencer_rpc_addresses
}

output "sequencer_raft_addresses" {
  description = "Raft addresses of the voters (host:7071)."
  value       = local.sequencer_raft_addresses
}

output "sequencer_instance_ids" {
  description = "EC2 instance of each voter, by Raft server ID."
  value       = { for id, instance in aws_instance.sequencer : id => instance.id }
}

output "sequencer_volume_ids" {
  description = "EBS data volume of each voter, by Raft server ID."
  value       = { for id, volume in aws_ebs_volume.sequencer : id => volume.id }
}

output "ecs_cluster_name" {
  description = "ECS cluster of the log nodes."
  value       = aws_ecs_cluster.this.name
}

output "lognode_service_names" {
  description = "ECS service of the log nodes in each zone."
  value       = { for zone, service in aws_ecs_service.lognode : zone => service.name }
}

output "lognode_task_role_arn" {
  description = "IAM role of the log node tasks."
  value       = aws_iam_role.lognode_task.arn
}

output "security_group_ids" {
  description = "Security groups by component. Give functions that call the sequencer the \"functions\" group."
  value = {
    sequencer = aws_security_group.sequencer.id
    lognode   = aws_security_group.lognode.id
    functions = aws_security_group.functions.id
    nlb       = aws_security_group.nlb.id
  }
}

output "log_group_names" {
  description = "CloudWatch log groups by component."
  value = {
    sequencer = aws_cloudwatch_log_group.sequencer.name
    lognode   = aws_cloudwatch_log_group.lognode.name
  }
}

output "kafka_bootstrap" {
  description = "Kafka bootstrap address (the load balancer's 9092)."
  value       = "${aws_lb.lognode.dns_name}:${local.kafka_port}"
}
