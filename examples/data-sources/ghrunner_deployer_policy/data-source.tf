# The policy of the identity that applies and destroys this deployment:
# render it with the provider configured as the deployment's (environment,
# region, iam_role_path, iam_permissions_boundary), and give it to the CI
# role that runs terraform, with whatever tool manages your IAM.
data "ghrunner_deployer_policy" "this" {
  name_prefix = "ghrunner" # the module's prefix
}

# The whole policy, for a role's inline policies (10,240 characters)...
output "deployer_policy" {
  value = data.ghrunner_deployer_policy.this.json
}

# ...or cut into documents of at most 6,144 characters, one customer
# managed policy each (the whole is larger than one can hold).
output "deployer_policy_documents" {
  value = data.ghrunner_deployer_policy.this.documents
}
