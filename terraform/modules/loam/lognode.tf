# Log nodes: stateless, any node serves any partition. One ECS service per zone, pinned to that
# zone's subnet, so every task knows its zone (LOAM_ZONE) from its task definition: zone-aware
# discovery (GET /v1/cluster/nodes?zone=) then keeps produce and fetch inside the client's zone.
# All services register with one internal network load balancer, one TCP listener (or TLS, with
# an ACM certificate) per port the log node serves (local.lognode_ports); cross-zone load
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

  # With the cluster identity, an init container writes it to the "identity" volume first.
  container_definitions = jsonencode(concat(local.identity_enabled ? [local.identity_init_container] : [], [
    merge({
      name      = "lognode"
      image     = var.lognode_image
      essential = true

      portMappings = [
        for name in sort(keys(local.lognode_ports)) : {
          name          = name
          containerPort = local.lognode_ports[name]
          protocol      = "tcp"
        }
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
      # A tuple of zero or one object, expanded: a conditional would unify both objects'
      # types and turn readOnly into a string, which ECS rejects.
      [for _ in local.identity_enabled ? ["identity"] : [] : {
        dependsOn   = [{ containerName = "identity", condition = "SUCCESS" }]
        mountPoints = [{ sourceVolume = "identity", containerPath = local.identity_dir, readOnly = true }]
    }]...),
  ]))

  # Task storage for the cluster identity's PEM files (Fargate ephemeral storage).
  dynamic "volume" {
    for_each = local.identity_enabled ? ["identity"] : []

    content {
      name = volume.value
    }
  }

  tags = merge(local.tags, { "loam:zone" = each.key })
}

resource "aws_ecs_service" "lognode" {
  for_each = var.subnet_ids

  name                               = "lognode-${each.key}"
  cluster                            = aws_ecs_cluster.this.id
  task_definition                    = aws_ecs_task_definition.lognode[each.key].arn
  desired_count                      = var.lognode_count_per_zone # the autoscaling floor; scaling owns it afterwards
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

  dynamic "load_balancer" {
    for_each = local.lognode_ports

    content {
      target_group_arn = aws_lb_target_group.lognode[load_balancer.key].arn
      container_name   = "lognode"
      container_port   = load_balancer.value
    }
  }

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  lifecycle {
    # Application Auto Scaling changes desired_count; a plan must not set it back.
    ignore_changes = [desired_count]

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
    aws_lb_listener.lognode,
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

# One target group per port; every one is health-checked on the HTTP API's /healthz, which
# answers for the whole node.
resource "aws_lb_target_group" "lognode" {
  for_each = local.lognode_ports

  name        = each.key == "http" ? "${var.name}-lognode" : "${var.name}-${each.key}"
  port        = each.value
  protocol    = "TCP"
  target_type = "ip"
  vpc_id      = var.vpc_id
  # Longer than a long-poll fetch, shorter than the task's stop timeout.
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

# TCP passes the nodes' own TLS (or plaintext) through; with lb_certificate_arn the balancer
# terminates TLS with that certificate instead (gRPC listeners negotiate HTTP/2 by ALPN).
resource "aws_lb_listener" "lognode" {
  for_each = local.lognode_ports

  load_balancer_arn = aws_lb.lognode.arn
  port              = each.value
  protocol          = var.lb_certificate_arn == null ? "TCP" : "TLS"
  certificate_arn   = var.lb_certificate_arn
  ssl_policy        = var.lb_certificate_arn == null ? null : var.lb_ssl_policy
  alpn_policy       = var.lb_certificate_arn != null && contains(["grpc", "otlpg"], each.key) ? "HTTP2Preferred" : null
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.lognode[each.key].arn
  }
}

moved {
  from = aws_lb_target_group.lognode
  to   = aws_lb_target_group.lognode["http"]
}

moved {
  from = aws_lb_listener.lognode_http
  to   = aws_lb_listener.lognode["http"]
}
