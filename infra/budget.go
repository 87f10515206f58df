package infra

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/budgets"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// BudgetArgs describes the opt-in monthly cost guard.
type BudgetArgs struct {
	ClusterName string
	MonthlyUSD  float64
	Emails      []string
	Tags        map[string]string
}

// Budget is an AWS Budget on the account's monthly cost. AWS Budgets filter by tag only
// once the tag is activated as a cost-allocation tag, which a stack cannot do for you, so
// the budget covers the whole account (see docs/operations.md, budget).
type Budget struct {
	pulumi.ResourceState

	Name pulumi.StringOutput `pulumi:"name"`
}

// NewBudget creates the budget with two e-mail alerts: actual spend above 80% of the limit,
// and forecast spend above 100%.
func NewBudget(ctx *pulumi.Context, name string, args *BudgetArgs, opts ...pulumi.ResourceOption) (*Budget, error) {
	b := &Budget{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:Budget", name, b, opts...); err != nil {
		return nil, err
	}
	alert := func(kind string, percent float64) budgets.BudgetNotificationInput {
		return budgets.BudgetNotificationArgs{
			ComparisonOperator:       pulumi.String("GREATER_THAN"),
			NotificationType:         pulumi.String(kind),
			Threshold:                pulumi.Float64(percent),
			ThresholdType:            pulumi.String("PERCENTAGE"),
			SubscriberEmailAddresses: pulumi.ToStringArray(args.Emails),
		}
	}
	budget, err := budgets.NewBudget(ctx, name, &budgets.BudgetArgs{
		Name:          pulumi.String(BudgetName(args.ClusterName)),
		BudgetType:    pulumi.String("COST"),
		TimeUnit:      pulumi.String("MONTHLY"),
		LimitAmount:   pulumi.String(strconv.FormatFloat(args.MonthlyUSD, 'f', 2, 64)),
		LimitUnit:     pulumi.String("USD"),
		Notifications: budgets.BudgetNotificationArray{alert("ACTUAL", 80), alert("FORECASTED", 100)},
		Tags:          tagMap(args.Tags, nil),
	}, pulumi.Parent(b))
	if err != nil {
		return nil, fmt.Errorf("creating budget: %w", err)
	}
	b.Name = budget.Name
	if err := ctx.RegisterResourceOutputs(b, pulumi.Map{"name": b.Name}); err != nil {
		return nil, err
	}
	return b, nil
}

// BudgetName is the cluster's budget, by which the deploy role reaches it.
func BudgetName(cluster string) string { return cluster + "-monthly" }
