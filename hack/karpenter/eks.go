package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/aws/karpenter-provider-aws/pkg/fake"
)

// eksAPI answers DescribeCluster for the clusters the program created, as EKS does; upstream's
// fake describes any name as one anonymous cluster without an endpoint.
type eksAPI struct {
	*fake.EKSAPI
	clusters map[string]ekstypes.Cluster
}

func (e eksAPI) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	c, ok := e.clusters[aws.ToString(in.Name)]
	if !ok {
		return nil, &ekstypes.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("No cluster found for name: %s.", aws.ToString(in.Name)))}
	}
	return &eks.DescribeClusterOutput{Cluster: &c}, nil
}
