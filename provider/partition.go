package provider

import "strings"

// The DNS suffix of AWS's service endpoints in a partition (the SDK's
// partition metadata, partitions.json: dnsSuffix): kms:ViaService values
// and S3 URLs are built from it, so they hold in China and the isolated
// regions too, not only in the aws partition.
func dnsSuffix(partition string) string {
	switch partition {
	case "aws-cn":
		return "amazonaws.com.cn"
	case "aws-iso":
		return "c2s.ic.gov"
	case "aws-iso-b":
		return "sc2s.sgov.gov"
	case "aws-iso-e":
		return "cloud.adc-e.uk"
	case "aws-iso-f":
		return "csp.hci.ic.gov"
	}
	return "amazonaws.com" // aws, aws-us-gov
}

// partitionOf is the partition of a region, by its name (partitions.json:
// regionRegex).
func partitionOf(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b"
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso"
	case strings.HasPrefix(region, "eu-isoe-"):
		return "aws-iso-e"
	case strings.HasPrefix(region, "us-isof-"):
		return "aws-iso-f"
	}
	return "aws"
}

// viaService is the kms:ViaService value of a service in a region.
func viaService(service, region string) string {
	return service + "." + region + "." + dnsSuffix(partitionOf(region))
}
