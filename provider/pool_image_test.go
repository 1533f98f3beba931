package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// A pool without image_id (issue 15 item 15): the latest image of its
// family for its instance types' architecture, from the publisher's public
// SSM parameter (moto carries Amazon Linux's, not Canonical's).

// withoutImage is f's config with image_id replaced by family and the
// instance types by types.
func (f poolFixture) withoutImage(family, types string) string {
	c := strings.Replace(f.config(""), fmt.Sprintf("image_id           = %q", f.ami), family, 1)
	return strings.Replace(c, `instance_types     = ["c7i.large", "m7i.large"]`, "instance_types     = "+types, 1)
}

func TestAccPool_latestImageOfItsFamily(t *testing.T) {
	f := newPoolFixture(t)
	latest, err := env.Config(t).SSM().GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(imageFamilies["al2023"]["arm64"])})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config: f.withoutImage(`image_family = "al2023"`, `["c7g.large", "m7g.large"]`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "image_id", aws.ToString(latest.Parameter.Value)),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "architecture", "arm64"),
					func(s *terraform.State) error {
						cfg, err := f.poolConfig()
						if err != nil || cfg.LaunchTemplateID == "" {
							return fmt.Errorf("pool config %+v, %v", cfg, err)
						}
						return nil
					},
				),
			},
			// Planned again: the image stays (no new template version).
			{Config: f.withoutImage(`image_family = "al2023"`, `["c7g.large", "m7g.large"]`), PlanOnly: true},
		},
	})
}

func TestAccPool_refusesAnImageItCannotFind(t *testing.T) {
	f := newPoolFixture(t)
	for _, c := range []struct{ family, types, want string }{
		// moto, like an account in a region Canonical does not publish to,
		// has no Ubuntu parameter: the error names it.
		{"", `["c7i.large"]`, `(?s)image_family.*/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id.*or set\s+image_id`},
		{`image_family = "al2023"`, `["c7i.large", "c7g.large"]`, `(?s)instance_types.*mix architectures`},
		{`image_family = "debian"`, `["c7i.large"]`, `(?s)image_family.*value must be one of`},
	} {
		t.Run(c.family+c.types, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				CheckDestroy:             f.checkNothingLeft,
				Steps:                    []resource.TestStep{{Config: f.withoutImage(c.family, c.types), ExpectError: regexp.MustCompile(c.want)}},
			})
		})
	}
}

// Issue 30, item 5: an x86 image with Graviton instance types applied, and
// EC2 then refused every launch of the pool at its first provision. The
// apply refuses it instead, naming both architectures, and creates nothing.
func TestAccPool_refusesAnImageOfAnotherArchitectureThanItsTypes(t *testing.T) {
	f := newPoolFixture(t)
	cfg := regexp.MustCompile(`(?m)^  instance_types += .*$`).ReplaceAllLiteralString(f.config(""), `  instance_types = ["c7g.large", "m7g.large"]`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             f.checkNothingLeft,
		Steps: []resource.TestStep{{Config: cfg,
			ExpectError: regexp.MustCompile(`(?s)image_id.*is amd64, but\s+instance_types.*arm64:\s+EC2\s+would\s+refuse\s+every\s+launch`)}},
	})
}
