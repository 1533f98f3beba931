package cost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// PricingAPI is the part of the AWS Price List API the prices need.
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// SpotAPI is the part of EC2 the spot prices need.
type SpotAPI interface {
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// Prices answers the prices of a region from AWS, each asked once per
// Prices (a report's run): a price, or why there is none. Nothing is
// guessed: a source that fails, or finds no price or several, leaves the
// rows that need it without a price.
type Prices struct {
	Region  string
	Pricing PricingAPI
	EC2     SpotAPI
	// From and To bound the spot price history averaged (the report's window).
	From, To time.Time

	mu    sync.Mutex
	cache map[string]priced
}

type priced struct {
	value float64
	err   error
}

// ErrNoPrice is wrapped by every answer without a price.
var ErrNoPrice = errors.New("no price")

func (p *Prices) cached(key string, ask func() (float64, error)) (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cache == nil {
		p.cache = map[string]priced{}
	}
	if c, ok := p.cache[key]; ok {
		return c.value, c.err
	}
	v, err := ask()
	if err != nil {
		err = fmt.Errorf("%w: %s", ErrNoPrice, err)
	}
	p.cache[key] = priced{v, err}
	return v, err
}

// Hourly is the price of an hour of instanceType bought as usageClass
// ("spot" or "on-demand"), in USD.
func (p *Prices) Hourly(ctx context.Context, instanceType, usageClass string) (float64, error) {
	if usageClass == "spot" {
		return p.cached("spot/"+instanceType, func() (float64, error) { return p.spot(ctx, instanceType) })
	}
	return p.cached("on-demand/"+instanceType, func() (float64, error) {
		// The attributes of a shared-tenancy Linux instance with no
		// pre-installed software, as the Price List names them (its
		// AmazonEC2 offer file); capacitystatus Used is the price of a
		// running instance, not of an unused reservation.
		return p.product(ctx, "Hrs", map[string]string{"instanceType": instanceType, "operatingSystem": "Linux",
			"tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required"})
	})
}

// VolumeMonthly is the price of a GB-month of EBS volumeType (gp3, io2, …).
func (p *Prices) VolumeMonthly(ctx context.Context, volumeType string) (float64, error) {
	return p.cached("ebs/"+volumeType, func() (float64, error) {
		return p.product(ctx, "GB-Mo", map[string]string{"productFamily": "Storage", "volumeApiName": volumeType})
	})
}

// product asks GetProducts for AmazonEC2 products of the region matching
// attrs and returns their one on-demand price per unit.
func (p *Prices) product(ctx context.Context, unit string, attrs map[string]string) (float64, error) {
	if p.Pricing == nil {
		return 0, errors.New("no price list client")
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"),
		Filters: []pricingtypes.Filter{{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("regionCode"), Value: aws.String(p.Region)}}}
	for _, k := range sortedKeys(attrs) {
		in.Filters = append(in.Filters, pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(k), Value: aws.String(attrs[k])})
	}
	found := map[float64]bool{}
	pages := pricing.NewGetProductsPaginator(p.Pricing, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("price list: %w", err)
		}
		for _, item := range page.PriceList {
			v, err := onDemandPrice(item, unit)
			if err != nil {
				return 0, err
			}
			found[v] = true
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("the price list has no product %v in %s", attrs, p.Region)
	case 1:
		for v := range found {
			return v, nil
		}
	}
	return 0, fmt.Errorf("the price list has %d different prices for %v in %s", len(found), attrs, p.Region)
}

// priceListItem is the part of one PriceList entry read: the documented
// aws_v1 format (Price List API, "Price List file format"): terms.OnDemand
// maps offer codes to terms, each of price dimensions with a unit and a
// pricePerUnit by currency, as a decimal string.
type priceListItem struct {
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func onDemandPrice(item, unit string) (float64, error) {
	var it priceListItem
	if err := json.Unmarshal([]byte(item), &it); err != nil {
		return 0, fmt.Errorf("price list item: %w", err)
	}
	for _, term := range it.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if dim.Unit != unit {
				continue
			}
			usd, ok := dim.PricePerUnit["USD"]
			if !ok {
				return 0, fmt.Errorf("price list item: no USD price per %s", unit)
			}
			v, err := strconv.ParseFloat(usd, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("price list item: USD price %q per %s is not a price", usd, unit)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("price list item: no on-demand price per %s", unit)
}

// spot is the mean of the spot prices of instanceType, every zone of the
// region, over the window (EC2 also returns the price in effect at its
// start): the record does not keep an instance's zone.
func (p *Prices) spot(ctx context.Context, instanceType string) (float64, error) {
	if p.EC2 == nil {
		return 0, errors.New("no EC2 client")
	}
	in := &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(instanceType)},
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}}
	if !p.From.IsZero() {
		in.StartTime, in.EndTime = aws.Time(p.From), aws.Time(p.To)
	}
	var sum float64
	var n int
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.EC2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("spot price history: %w", err)
		}
		for _, h := range page.SpotPriceHistory {
			if string(h.InstanceType) != instanceType {
				continue
			}
			v, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("spot price history: %q is not a price", aws.ToString(h.SpotPrice))
			}
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("the spot price history of %s in %s is empty", instanceType, p.Region)
	}
	return sum / float64(n), nil
}
