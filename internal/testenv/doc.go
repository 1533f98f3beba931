// Package testenv is the parent of the test world: the emulators, fakes
// and harnesses the tests and the sandbox run the product against (moto,
// a fake GitHub and runner, an instance metadata stub, an IAM policy
// evaluator, an instance host
// that runs real agents, a Lambda runtime API host, the release checks and
// the benchmark table). Nothing shipped may import any of it:
// TestShippedBinariesImportNoTestWorld holds the provider, the Lambda
// bundle and the agent to that.
package testenv
