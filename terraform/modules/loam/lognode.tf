# Log nodes: stateless, any node serves any partition. One ECS service per zone, pinned to that
# zone's subnet, so every task knows its zone (LOAM_ZONE) from its task definition: zone-aware
# discovery (GET /v1/cluster/nodes?zone=) then keeps produce and fetch inside the client's zone.
# All services register with one internal network load balancer on 8080; cross-zone load
# balancing stays off, so a client using the balancer's zonal DNS name stays in its zone too.

resource "aws_ecs_cluster" "this" {
  name = var.name
  tags = local.tags

  setting {
    name  = "containerInsights"
    value = var.ecs_container_insights ? "enabled" : "disabled"
  }
}

resource "aws_ecs_task_definition" "lognode" {
  for_each = var.subnet_ids

  family                   = "${var.name}-lognode-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.lognode_cpu
  memory                   = var.lognode_memory
  task_role_arn            = aws_iam_role.lognode_task.arn
  execution_role_arn       = aws_iam_role.lognode_execution.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = local.ecs_cpu_architecture
  }

  container_definitions = jsonencode([
    {
      name      = "lognode"
      image     = var.lognode_image
      essential = true

      portMappings = [
        {
          name          = "http"
          containerPort = local.http_port
          protocol      = "tcp"
        },
        {
          name          = "kafka"
          containerPort = local.kafka_port
          protocol      = "tcp"
        },
      ]

      # Sorted by name: ECS returns the list sorted, and an unsorted one would show a diff on
      # every plan.
      environment = [
        for name in sort(keys(local.lognode_environment[each.key])) : {
          name  = name
          value = local.lognode_environment[each.key][name]
        }
      ]

      healthCheck = {
        command     = ["CMD", local.lognode_healthcheck_binary, local.lognode_healthcheck_url]
        interval    = 10
        timeout     = 5
        retries     = 3
        startPeriod = 30
      }

      # lognode-svc drains for up to 70 s after SIGTERM (flush, commit, ack); Fargate allows 120.
      stopTimeout = 90

      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.lognode.name
          awslogs-region        = local.region
          awslogs-stream-prefix = each.key
        }
      }
    },
  ])

  tags = merge(local.tags, { "loam:zone" = each.key })
}

resource "aws_ecs_service" "lognode" {
  for_each = var.subnet_ids

  name                               = "lognode-${each.key}"
  cluster                            = aws_ecs_cluster.this.id
  task_definition                    = aws_ecs_task_definition.lognode[each.key].arn
  desired_count                      = var.lognode_count_per_zone
  launch_type                        = "FARGATE"
  platform_version                   = "LATEST"
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200
  health_check_grace_period_seconds  = 60
  enable_ecs_managed_tags            = true
  propagate_tags                     = "SERVICE"
  tags                               = merge(local.tags, { "loam:zone" = each.key })

  network_configuration {
    subnets          = [each.value]
    security_groups  = [aws_security_group.lognode.id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.lognode.arn
    container_name   = "lognode"
    container_port   = local.http_port
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.lognode_kafka.arn
    container_name   = "lognode"
    container_port   = local.kafka_port
  }

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  lifecycle {
    precondition {
      condition     = data.aws_subnet.this[each.key].availability_zone == each.key
      error_message = "subnet_ids[\"${each.key}\"] lies in zone ${data.aws_subnet.this[each.key].availability_zone}: its log nodes would report the wrong LOAM_ZONE."
    }
  }

  # The task role's policy must exist before a task uses it; the listener before the service
  # registers targets; the sequencer before log nodes dial it (they retry, but start cleaner).
  depends_on = [
    aws_iam_role_policy.lognode_task,
    aws_iam_role_policy.lognode_execution,
    aws_lb_listener.lognode_http,
    aws_lb_listener.lognode_kafka,
    aws_volume_attachment.sequencer,
  ]
}

resource "aws_lb" "lognode" {
  name                             = "${var.name}-lognode"
  internal                         = true
  load_balancer_type               = "network"
  subnets                          = values(var.subnet_ids)
  security_groups                  = [aws_security_group.nlb.id]
  enable_cross_zone_load_balancing = false
  tags                             = local.tags
}

resource "aws_lb_target_group" "lognode" {
  name        = "${var.name}-lognode"
  port        = local.http_port
  protocol    = "TCP"
  target_type = "ip"
  vpc_id      = var.vpc_id
  # Longer than a long-poll fetch, shorter than the task's stop timeout.
  deregistration_delay = 75
  tags                 = local.tags

  health_check {
    protocol            = "HTTP"
    port                = "traffic-port"
    path                = "/healthz"
    matcher             = "200"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_listener" "lognode_http" {
  load_balancer_arn = aws_lb.lognode.arn
  port              = local.http_port
  protocol          = "TCP"
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.lognode.arn
  }
}
