package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"

	"github.com/aws/karpenter-provider-aws/pkg/controllers/interruption/messages"
	"github.com/aws/karpenter-provider-aws/pkg/controllers/interruption/messages/spotinterruption"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
)

// Instance is a fake EC2 instance as the e2e reads it.
type Instance struct {
	ID           string `json:"id"`
	Type         string `json:"type"`
	Zone         string `json:"zone"`
	Subnet       string `json:"subnet"`
	CapacityType string `json:"capacityType"`
	State        string `json:"state"`
}

// Account is what the fake account holds that a destroy must leave empty.
type Account struct {
	Instances        []Instance `json:"instances"`
	LaunchTemplates  []string   `json:"launchTemplates"`
	InstanceProfiles []string   `json:"instanceProfiles"`
	QueuedMessages   int        `json:"queuedMessages"`
}

// serveControl answers the e2e on loopback only:
//
//	GET  /account                  the fake account (Account)
//	POST /interrupt?instance=i-…   EC2's spot interruption warning for it, on the queue
//	PUT  /shortage                 the capacity pools EC2 has none of from now on (a JSON list
//	                               of {capacityType, instanceType, zone}; [] ends the shortage):
//	                               CreateFleet answers InsufficientInstanceCapacity for them,
//	                               as upstream's fake does (pkg/fake/ec2api.go, CreateFleet)
func serveControl(ctx context.Context, l net.Listener, c *cloud) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /account", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, c.account())
	})
	mux.HandleFunc("POST /interrupt", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("instance")
		if _, ok := c.ec2.Instances.Load(id); !ok {
			http.Error(w, fmt.Sprintf("no instance %q", id), http.StatusNotFound)
			return
		}
		c.sqs.Send(c.spotInterruption(id))
		writeJSON(w, map[string]string{"sent": id})
	})
	mux.HandleFunc("PUT /shortage", func(w http.ResponseWriter, r *http.Request) {
		var pools []fake.CapacityPool
		if err := json.NewDecoder(r.Body).Decode(&pools); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.ec2.InsufficientCapacityPools.Set(pools)
		writeJSON(w, map[string]int{"pools": len(pools)})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	_ = srv.Serve(l)
}

func (c *cloud) account() Account {
	a := Account{Instances: []Instance{}, LaunchTemplates: []string{}, InstanceProfiles: []string{}, QueuedMessages: c.sqs.Len()}
	c.ec2.Instances.Range(func(_, v any) bool {
		in := v.(ec2types.Instance)
		capacity := "on-demand"
		if in.SpotInstanceRequestId != nil {
			capacity = "spot"
		}
		a.Instances = append(a.Instances, Instance{ID: aws.ToString(in.InstanceId), Type: string(in.InstanceType),
			Zone: aws.ToString(in.Placement.AvailabilityZone), Subnet: aws.ToString(in.SubnetId), CapacityType: capacity, State: string(in.State.Name)})
		return true
	})
	c.ec2.LaunchTemplates.Range(func(_, v any) bool {
		a.LaunchTemplates = append(a.LaunchTemplates, aws.ToString(v.(ec2types.LaunchTemplate).LaunchTemplateName))
		return true
	})
	c.iam.Lock()
	for name := range c.iam.InstanceProfiles {
		a.InstanceProfiles = append(a.InstanceProfiles, name)
	}
	c.iam.Unlock()
	sort.Slice(a.Instances, func(i, j int) bool { return a.Instances[i].ID < a.Instances[j].ID })
	sort.Strings(a.LaunchTemplates)
	sort.Strings(a.InstanceProfiles)
	return a
}

// spotInterruption is the EventBridge event EC2 sends two minutes before it reclaims a spot
// instance (aws.ec2 "EC2 Spot Instance Interruption Warning"), in upstream's own model of it.
func (c *cloud) spotInterruption(id string) string {
	parser := spotinterruption.Parser{}
	msg := spotinterruption.Message{
		Metadata: messages.Metadata{
			Account: c.accountID, DetailType: parser.DetailType(), ID: uuid.NewString(), Region: c.region,
			Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", c.region, c.accountID, id)},
			Source:    parser.Source(), Time: time.Now().UTC(), Version: parser.Version(),
		},
		Detail: spotinterruption.Detail{InstanceID: id, InstanceAction: "terminate"},
	}
	raw, _ := json.Marshal(msg)
	return string(raw)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
