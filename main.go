// Command terraform-provider-ghrunner is the ghrunner Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/ghrunner/terraform-provider-ghrunner/provider"
)

// version is set by the release build.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/ghrunner/ghrunner",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
