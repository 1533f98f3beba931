# The queue of one pool: clean, released instances wait here for the next provision.
resource "ghrunner_queue" "linux" {
  name                       = "ghrunner-prod-linux"
  visibility_timeout_seconds = 30
  message_retention_seconds  = 86400

  # Optional: pool messages received max_receive_count times move here. Keep
  # the count high (the default, 1000): provisions receive pool messages and
  # put back those that do not match, so healthy messages are received often.
  dead_letter_queue_arn = ghrunner_queue.linux_dlq.arn
  max_receive_count     = 1000

  tags = {
    owner = "platform-team"
  }
}

# The dead letter queue: keeps what it gets for the longest SQS allows.
resource "ghrunner_queue" "linux_dlq" {
  name                      = "ghrunner-prod-linux-dlq"
  message_retention_seconds = 1209600
}
