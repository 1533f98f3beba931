package fleet

// One subnet per Availability Zone in each CreateFleet request. An EC2
// Fleet request cannot span different subnets of the same AZ (EC2 User
// Guide, "EC2 Fleet limitations"): the instance type in two subnets of one
// AZ is the same instance pool twice, and EC2 refuses the whole request
// with InvalidFleetConfig, "The fleet configuration contains duplicate
// instance pools." (as quoted in aws-samples/aws-plugin-for-slurm #19 and
// github-aws-runners/terraform-aws-github-runner #2904 and #5297).
//
// A pool may still list several subnets of one AZ (more addresses): each
// request takes one of them per AZ; successive launches of a fleet start at
// each AZ's next subnet, and a launch that came back short for capacity or
// addresses asks the AZs' other subnets for what is missing.

// subnetRounds are the subnet sets a launch tries, in order: round k takes,
// from each AZ in the order subnets first names it, its subnet (start+k)
// mod n, n being how many subnets the AZ has. A subnet zones does not know
// is an AZ of its own (a pool config written before it carried the zones:
// every subnet in every request, as then).
func subnetRounds(subnets []string, zones map[string]string, start int) [][]string {
	var order []string
	byZone := map[string][]string{}
	for _, s := range subnets {
		z, ok := zones[s]
		if !ok || z == "" {
			z = "\x00" + s
		}
		if _, seen := byZone[z]; !seen {
			order = append(order, z)
		}
		byZone[z] = append(byZone[z], s)
	}
	rounds := 1
	for _, z := range order {
		rounds = max(rounds, len(byZone[z]))
	}
	start = max(start, 0)
	out := make([][]string, 0, rounds)
	for k := 0; k < rounds; k++ {
		var set []string
		for _, z := range order {
			in := byZone[z]
			set = append(set, in[(start+k)%len(in)])
		}
		out = append(out, set)
	}
	return out
}

// shortOfPlace says whether a request came back short for reasons another
// subnet of the same AZs may not have: capacity, or free addresses in the
// subnet.
func (r LaunchResult) shortOfPlace() bool {
	for _, e := range r.Errors {
		if IsEC2CapacityShortageCode(e.Code) || e.Code == "InsufficientFreeAddressesInSubnet" {
			return true
		}
	}
	return false
}
