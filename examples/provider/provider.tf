terraform {
  required_providers {
    ghrunner = {
      source  = "ghrunner/ghrunner"
      version = "~> 0.1"
    }
  }
}

provider "ghrunner" {
  region      = "eu-west-1"
  environment = "prod" # scopes and tags (ghr:environment) everything the provider creates

  default_tags = {
    cost-center = "ci"
  }
}
