package sandbox

import (
	"net/http"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakepricing"
)

// The AWS Price List API at the front endpoint, for `ghrunner cost`
// (moto has no pricing service: internal/testenv/fakepricing is the
// hand-written stand-in). The endpoint serves it in the sandbox's region,
// us-east-1, the region the Price List API answers in (awsconf.Pricing).
//
// The prices are the list prices of what examples/sandbox's pools use:
// their instance types on demand (Linux, shared tenancy) and the root
// volume's type (the provider's default, gp3), as AWS's Amazon EC2
// On-Demand Pricing and Amazon EBS pricing pages list them for US East
// (N. Virginia). They are written here, not fetched, so they may have
// moved since: check them there before quoting a figure. The spot pool of
// the chaos deployment is priced from moto's DescribeSpotPriceHistory.
var sandboxPrices = []fakepricing.Product{
	fakepricing.Linux(Region, "c7i.large", "0.0892500000"),
	fakepricing.Linux(Region, "m7i.large", "0.1008000000"),
	fakepricing.Volume(Region, "gp3", "0.0800000000"),
}

// pricingTarget prefixes the Price List API's X-Amz-Target (botocore's
// model of pricing 2017-10-15: targetPrefix AWSPriceListService).
const pricingTarget = "AWSPriceListService."

// withPricing answers the Price List API and passes the rest on.
func withPricing(next http.Handler) http.Handler {
	prices := fakepricing.NewHandler(sandboxPrices...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-Amz-Target"), pricingTarget) {
			prices.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
