output "http_endpoint" {
  description = "Native HTTP API through the internal load balancer (reachable from inside the VPC)."
  value       = module.loam.http_endpoint
}

output "kafka_bootstrap" {
  description = "Kafka bootstrap address."
  value       = module.loam.kafka_bootstrap
}

output "bucket_name" {
  description = "Data bucket."
  value       = module.loam.bucket_name
}

output "vpc_id" {
  description = "The VPC the example created; run clients inside it (or peer it)."
  value       = aws_vpc.this.id
}

output "private_subnet_ids" {
  description = "The cluster's private subnets, by zone."
  value       = { for zone, s in aws_subnet.private : zone => s.id }
}
