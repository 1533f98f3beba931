package listener

import (
	"fmt"
	"strings"
)

// An App installed without the permission over the owner's runners (an
// owner who has not accepted the App's new permissions, an App made
// without it) cannot get the registration token the scale set client
// trades for its admin token: every call fails at GitHub's 403, whose
// text alone does not say what the operator has to change. withHint
// names the permission in the error the scale set's status shows.
//
// github.com/actions/scaleset v0.4.0 gives no typed error for it
// (client.go, getRunnerRegistrationToken: "failed to get runner
// registration token (<status>)" through newRequestResponseError): the
// hint keys on that text, pinned with the library's version.
const registrationRefused = "failed to get runner registration token (403"

// withHint is err with what to grant when it is GitHub refusing owner's
// registration token to the App ("org" or "org/repo"); err as it is
// otherwise.
func withHint(err error, owner string) error {
	if err == nil || !strings.Contains(err.Error(), registrationRefused) {
		return err
	}
	if strings.Contains(owner, "/") {
		return fmt.Errorf("the GitHub App may not manage the self-hosted runners of repository %s: grant it the repository permission Administration (administration: write) and have the installation accept it: %w", owner, err)
	}
	return fmt.Errorf("the GitHub App may not manage the self-hosted runners of organization %s: grant it the organization permission Self-hosted runners (organization_self_hosted_runners: write) and have the installation accept it: %w", owner, err)
}
