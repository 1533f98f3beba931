# The queue of one pool: clean, released instances wait here for the next provision.
resource "ghrunner_queue" "linux" {
  name                       = "ghrunner-prod-linux"
  visibility_timeout_seconds = 30
  message_retention_seconds  = 86400
}
