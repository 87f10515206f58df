package cost

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/luxfi/lux-gpu-ci/pricing"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// PriceSource looks up current EC2 prices (gpuci cost --live).
type PriceSource interface {
	OnDemand(ctx context.Context, region, instanceType string) (float64, error)
	Spot(ctx context.Context, region, instanceType string) (float64, error)
}

// LivePrices replaces the table's instance prices with current ones for the given types.
func LivePrices(ctx context.Context, base pricing.Prices, src PriceSource, region string, onDemand, spot []string) (pricing.Prices, error) {
	p := base
	p.Source = fmt.Sprintf("AWS Pricing API and DescribeSpotPriceHistory, %s, %s (other items: %s)", region, time.Now().UTC().Format("2006-01-02"), base.Source)
	p.OnDemand, p.Spot = map[string]float64{}, map[string]float64{}
	for _, it := range onDemand {
		v, err := src.OnDemand(ctx, region, it)
		if err != nil {
			return base, fmt.Errorf("on-demand price of %s: %w", it, err)
		}
		p.OnDemand[it] = v
	}
	for _, it := range spot {
		v, err := src.Spot(ctx, region, it)
		if err != nil {
			return base, fmt.Errorf("spot price of %s: %w", it, err)
		}
		p.Spot[it] = v
	}
	return p, nil
}

// AWSPrices asks AWS, with the default credential chain.
type AWSPrices struct {
	pricing *awspricing.Client
	ec2     func(region string) *ec2.Client
}

// NewAWSPrices loads AWS credentials the usual way (environment, profile, SSO, role).
func NewAWSPrices(ctx context.Context) (*AWSPrices, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("--live needs AWS credentials: %w", err)
	}
	// The Pricing API is served from us-east-1.
	pc := cfg.Copy()
	pc.Region = "us-east-1"
	return &AWSPrices{
		pricing: awspricing.NewFromConfig(pc),
		ec2: func(region string) *ec2.Client {
			c := cfg.Copy()
			c.Region = region
			return ec2.NewFromConfig(c)
		},
	}, nil
}

// OnDemand is the Linux, shared-tenancy on-demand hourly price.
func (a *AWSPrices) OnDemand(ctx context.Context, region, instanceType string) (float64, error) {
	filter := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	out, err := a.pricing.GetProducts(ctx, &awspricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{
			filter("instanceType", instanceType), filter("regionCode", region), filter("operatingSystem", "Linux"),
			filter("tenancy", "Shared"), filter("preInstalledSw", "NA"), filter("capacitystatus", "Used"),
		},
		MaxResults: aws.Int32(10),
	})
	if err != nil {
		return 0, err
	}
	for _, doc := range out.PriceList {
		if price, ok := ParseOnDemandPrice(doc); ok {
			return price, nil
		}
	}
	return 0, fmt.Errorf("no on-demand price listed for %s in %s (run without --live for the built-in table, or give --prices)", instanceType, region)
}

// ParseOnDemandPrice reads the hourly USD price from one Pricing API price-list document.
func ParseOnDemandPrice(doc string) (float64, bool) {
	var product struct {
		Terms struct {
			OnDemand map[string]struct {
				PriceDimensions map[string]struct {
					Unit         string            `json:"unit"`
					PricePerUnit map[string]string `json:"pricePerUnit"`
				} `json:"priceDimensions"`
			} `json:"OnDemand"`
		} `json:"terms"`
	}
	if json.Unmarshal([]byte(doc), &product) != nil {
		return 0, false
	}
	for _, term := range product.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64); err == nil && v > 0 && dim.Unit == "Hrs" {
				return v, true
			}
		}
	}
	return 0, false
}

// Spot is the mean of the latest Linux spot price in each availability zone.
func (a *AWSPrices) Spot(ctx context.Context, region, instanceType string) (float64, error) {
	out, err := a.ec2(region).DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{ec2types.InstanceType(instanceType)},
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(time.Now()),
	})
	if err != nil {
		return 0, err
	}
	latest := map[string]float64{}
	for _, h := range out.SpotPriceHistory {
		az := aws.ToString(h.AvailabilityZone)
		if _, seen := latest[az]; seen {
			continue // newest first
		}
		if v, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64); err == nil {
			latest[az] = v
		}
	}
	if len(latest) == 0 {
		return 0, fmt.Errorf("no spot price for %s in %s (run without --live for the built-in table, or give --prices)", instanceType, region)
	}
	sum := 0.0
	for _, v := range latest {
		sum += v
	}
	return sum / float64(len(latest)), nil
}
