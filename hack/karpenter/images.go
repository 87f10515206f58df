package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/aws/karpenter-provider-aws/pkg/fake"
)

// amis keeps SSM's answer and EC2's description of an AMI consistent, as AWS does: upstream's
// fake SSM returns a stable AMI ID per parameter, but its fake EC2 describes any AMI as a new
// random image on every call, which a running Karpenter reads as a changed AMI and so drifts
// every node. Here an AMI that SSM named is described as itself, with the architecture its
// parameter names, created once.
type amis struct {
	mu     sync.Mutex
	byID   map[string]ec2types.Image
	origin time.Time
}

type ssmAPI struct {
	*fake.SSMAPI
	amis *amis
}

func (s ssmAPI) GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	out, err := s.SSMAPI.GetParameter(ctx, in, opts...)
	if err != nil || out.Parameter == nil {
		return out, err
	}
	name, id := aws.ToString(in.Name), aws.ToString(out.Parameter.Value)
	arch := ec2types.ArchitectureValuesX8664
	if strings.Contains(name, "arm64") || strings.Contains(name, "aarch64") {
		arch = ec2types.ArchitectureValuesArm64
	}
	s.amis.mu.Lock()
	defer s.amis.mu.Unlock()
	if _, ok := s.amis.byID[id]; !ok {
		s.amis.byID[id] = ec2types.Image{ImageId: aws.String(id), Name: aws.String(name), Architecture: arch,
			CreationDate: aws.String(s.amis.origin.Format(time.RFC3339)), State: ec2types.ImageStateAvailable}
	}
	return out, nil
}

type ec2API struct {
	*fake.EC2API
	amis      *amis
	templates *launchTemplates
}

func (e ec2API) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	ids := append([]string(nil), in.ImageIds...)
	for _, f := range in.Filters {
		if aws.ToString(f.Name) == "image-id" {
			ids = append(ids, f.Values...)
		}
	}
	e.amis.mu.Lock()
	defer e.amis.mu.Unlock()
	out := &ec2.DescribeImagesOutput{}
	for _, id := range ids {
		if img, ok := e.amis.byID[id]; ok {
			out.Images = append(out.Images, img)
		}
	}
	return out, nil
}

// launchTemplates remembers what each launch template launches and how it is tagged, as EC2
// does: upstream's fake CreateFleet starts instances with the image of whichever template was
// created last and with no subnet or security groups, which a running Karpenter reads as drift
// (its AMI, subnet and security-group checks in pkg/cloudprovider/drift.go) and so replaces
// every node; and it stores templates untagged, so Karpenter's clean-up (which finds its
// templates by tag) deletes none.
type launchTemplates struct {
	mu   sync.Mutex
	data map[string]*ec2types.RequestLaunchTemplateData
}

func (e ec2API) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	out, err := e.EC2API.CreateLaunchTemplate(ctx, in, opts...)
	if err != nil || aws.ToBool(in.DryRun) {
		return out, err
	}
	e.templates.mu.Lock()
	defer e.templates.mu.Unlock()
	e.templates.data[aws.ToString(in.LaunchTemplateName)] = in.LaunchTemplateData
	// EC2 keeps the template's tags (Karpenter finds its templates by them to delete them).
	lt := ec2types.LaunchTemplate{LaunchTemplateName: in.LaunchTemplateName, LaunchTemplateId: aws.String(fmt.Sprintf("lt-%017d", len(e.templates.data)))}
	for _, spec := range in.TagSpecifications {
		if spec.ResourceType == ec2types.ResourceTypeLaunchTemplate {
			lt.Tags = append(lt.Tags, spec.Tags...)
		}
	}
	e.EC2API.LaunchTemplates.Store(in.LaunchTemplateName, lt)
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &lt}, nil
}

func (e ec2API) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := e.EC2API.CreateFleet(ctx, in, opts...)
	if err != nil || aws.ToBool(in.DryRun) || len(out.Instances) == 0 {
		return out, err
	}
	e.templates.mu.Lock()
	data := e.templates.data[aws.ToString(in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName)]
	e.templates.mu.Unlock()
	override := out.Instances[0].LaunchTemplateAndOverrides.Overrides
	var tags []ec2types.Tag
	for _, spec := range in.TagSpecifications {
		if spec.ResourceType == ec2types.ResourceTypeInstance {
			tags = append(tags, spec.Tags...)
		}
	}
	for _, id := range out.Instances[0].InstanceIds {
		raw, ok := e.EC2API.Instances.Load(id)
		if !ok {
			continue
		}
		in := raw.(ec2types.Instance)
		in.SubnetId, in.Tags = override.SubnetId, tags
		if data != nil {
			in.ImageId = data.ImageId
			groups := data.SecurityGroupIds
			for _, ni := range data.NetworkInterfaces {
				groups = append(groups, ni.Groups...)
			}
			for _, g := range groups {
				in.SecurityGroups = append(in.SecurityGroups, ec2types.GroupIdentifier{GroupId: aws.String(g)})
			}
		}
		e.EC2API.Instances.Store(id, in)
	}
	return out, nil
}

// DeleteLaunchTemplate deletes by name, as EC2 does: upstream's fake stores templates under
// the request's name pointer and deletes under another pointer, so nothing is ever deleted.
func (e ec2API) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	e.EC2API.LaunchTemplates.Range(func(k, v any) bool {
		lt := v.(ec2types.LaunchTemplate)
		if aws.ToString(lt.LaunchTemplateName) == aws.ToString(in.LaunchTemplateName) || (in.LaunchTemplateId != nil && aws.ToString(lt.LaunchTemplateId) == aws.ToString(in.LaunchTemplateId)) {
			e.EC2API.LaunchTemplates.Delete(k)
		}
		return true
	})
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}
