output "bucket_name" {
  description = "Data bucket."
  value       = module.loam.bucket_name
}

output "table_name" {
  description = "Coordination table."
  value       = module.loam.table_name
}

output "queue_url" {
  description = "Queue of the bucket's wal/ notifications (the segmenter's event source)."
  value       = module.loam.queue_url
}

output "sequencer_addresses" {
  description = "What the functions dial: the sequencer container."
  value       = module.loam.sequencer_addresses
}
