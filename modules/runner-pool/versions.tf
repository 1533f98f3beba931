terraform {
  required_version = ">= 1.5"

  required_providers {
    ghrunner = {
      source  = "ghrunner/ghrunner"
      version = ">= 0.1"
    }
  }
}
