output "http_endpoint" {
  description = "Native HTTP API through the internal load balancer."
  value       = module.loam.http_endpoint
}

output "bucket_name" {
  description = "Data bucket."
  value       = module.loam.bucket_name
}

output "table_name" {
  description = "DynamoDB coordination table."
  value       = module.loam.table_name
}

output "queue_arn" {
  description = "Queue of wal/ object-created notifications, for the functions to consume."
  value       = module.loam.queue_arn
}

output "sequencer_addresses" {
  description = "Sequencer RPC addresses."
  value       = module.loam.sequencer_addresses
}
