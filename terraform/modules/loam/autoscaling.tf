# Log node autoscaling: each zone's service scales between lognode_min_per_zone and
# lognode_max_per_zone tasks on two target-tracking policies, whichever asks for more tasks:
# average CPU, and the produce bytes per second per task that every log node publishes through
# CloudWatch's embedded metric format (lognode-svc --emf-interval; metric
# Loam/ProduceBytesPerSecond with dimensions Deployment and Zone).

resource "aws_appautoscaling_target" "lognode" {
  for_each = contains(var.emulator_unsupported, "application_autoscaling") ? {} : var.subnet_ids

  service_namespace  = "ecs"
  scalable_dimension = "ecs:service:DesiredCount"
  resource_id        = "service/${aws_ecs_cluster.this.name}/${aws_ecs_service.lognode[each.key].name}"
  min_capacity       = var.lognode_min_per_zone
  max_capacity       = var.lognode_max_per_zone
  tags               = local.tags
}

resource "aws_appautoscaling_policy" "lognode_cpu" {
  for_each = aws_appautoscaling_target.lognode

  name               = "${var.name}-lognode-${each.key}-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.lognode[each.key].service_namespace
  scalable_dimension = aws_appautoscaling_target.lognode[each.key].scalable_dimension
  resource_id        = aws_appautoscaling_target.lognode[each.key].resource_id

  target_tracking_scaling_policy_configuration {
    target_value       = var.lognode_cpu_target_percent
    scale_in_cooldown  = 300
    scale_out_cooldown = 60

    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}

resource "aws_appautoscaling_policy" "lognode_produce_bytes" {
  for_each = aws_appautoscaling_target.lognode

  name               = "${var.name}-lognode-${each.key}-produce-bytes"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.lognode[each.key].service_namespace
  scalable_dimension = aws_appautoscaling_target.lognode[each.key].scalable_dimension
  resource_id        = aws_appautoscaling_target.lognode[each.key].resource_id

  target_tracking_scaling_policy_configuration {
    target_value       = var.lognode_produce_bytes_target
    scale_in_cooldown  = 300
    scale_out_cooldown = 60

    # Every task of the zone's service publishes one datapoint per minute under the same
    # dimensions: their Average is the per-task rate the policy holds at the target.
    customized_metric_specification {
      namespace   = local.metric_namespace
      metric_name = "ProduceBytesPerSecond"
      statistic   = "Average"
      unit        = "Bytes/Second"

      dimensions {
        name  = "Deployment"
        value = var.name
      }

      dimensions {
        name  = "Zone"
        value = each.key
      }
    }
  }
}
