# Workflows of two repositories, and of no other, may assume this role with
# ghrunner's action (role-to-assume = the role's arn and permissions:
# id-token: write; aws-actions/configure-aws-credentials works too) and
# invoke provision and release; the role can do nothing else.
resource "ghrunner_invoker_role" "ci" {
  name         = "ci"
  repositories = ["octo-org/app", "octo-org/infra"]
  function_arns = [
    "arn:aws:lambda:eu-west-1:123456789012:function:ghrunner-provision",
    "arn:aws:lambda:eu-west-1:123456789012:function:ghrunner-release",
  ]
  create_oidc_provider = true # unless the account has GitHub's already
}
