# The policy of the identity that applies and destroys this deployment:
# render it with the provider configured as the deployment's (environment,
# region, iam_role_path, iam_permissions_boundary), and give it to the CI
# role that runs terraform, with whatever tool manages your IAM.
data "ghrunner_deployer_policy" "this" {
  name_prefix = "ghrunner" # the module's prefix
}

output "deployer_policy" {
  value = data.ghrunner_deployer_policy.this.json
}
