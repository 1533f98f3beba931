resource "ghrunner_table" "state" {
  name   = "ci-state"
  stream = true # just-in-time runners (the pool's default registration)
}

resource "ghrunner_queue" "linux" {
  name = "ci-linux"
}

resource "ghrunner_pool" "linux" {
  name           = "linux"
  table          = ghrunner_table.state.name
  queue_url      = ghrunner_queue.linux.url
  owner          = "acme"
  image_id       = "ami-0123456789abcdef0"
  instance_types = ["c7i.large", "m7i.large"]
  subnet_ids     = ["subnet-0123456789abcdef0"]
  max_instances  = 20

  idle_windows = [{
    cron       = "* 8-18 * * 1-5"
    time_zone  = "Europe/Berlin"
    idle_count = 3
  }]

  # Also serve a runner scale set: jobs say `runs-on: linux-ci`, with no
  # provision or release job (just-in-time runners, the default registration).
  scale_set = {
    name        = "linux-ci"
    max_runners = 10
  }

  pre_runner_script = <<-EOT
    #!/bin/bash
    apt-get install -y jq
  EOT
}
