# A queue is imported by its name or its URL.
terraform import ghrunner_queue.linux ghrunner-prod-linux
terraform import ghrunner_queue.linux https://sqs.eu-west-1.amazonaws.com/123456789012/ghrunner-prod-linux
