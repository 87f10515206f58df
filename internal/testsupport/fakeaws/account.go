package fakeaws

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// QueueNameReuse is how long SQS refuses a deleted queue's name.
const QueueNameReuse = 60 * time.Second

// accountState is what AWS remembers about the account between calls.
type accountState struct {
	// DeletedQueues are queue names and when they were deleted.
	DeletedQueues map[string]time.Time `json:"deletedQueues,omitempty"`
	// SpotRole: the EC2 Spot service-linked role exists (created by a stack).
	SpotRole bool `json:"spotRole,omitempty"`
	// Subnets are the account's subnets, by ID (getSubnets and getSubnet read them).
	Subnets map[string]Subnet `json:"subnets,omitempty"`
	// Clusters are the EKS clusters the stack created, by name; ClusterVersions their
	// Kubernetes versions.
	Clusters        []string          `json:"clusters,omitempty"`
	ClusterVersions map[string]string `json:"clusterVersions,omitempty"`
	// NodeGroups are the managed node groups the stack created, by ID.
	NodeGroups map[string]NodeGroup `json:"nodeGroups,omitempty"`
}

// Subnet is what the fake remembers of a subnet.
type Subnet struct {
	AZ   string            `json:"az"`
	AZID string            `json:"azId"`
	Tags map[string]string `json:"tags,omitempty"`
}

// accountMu serializes the account's state: the engine creates resources in parallel, and a
// read of the state file in the middle of another call's write would see half of it.
var accountMu sync.Mutex

// update applies change to the account's state and saves it, as one step.
func (c *Cloud) update(change func(st *accountState)) error {
	accountMu.Lock()
	defer accountMu.Unlock()
	st, err := c.load()
	if err != nil {
		return err
	}
	change(st)
	return c.save(st)
}

// read returns the account's state.
func (c *Cloud) read() (*accountState, error) {
	accountMu.Lock()
	defer accountMu.Unlock()
	return c.load()
}

func (c *Cloud) load() (*accountState, error) {
	if c.StateDir == "" {
		if c.memory == nil {
			c.memory = &accountState{}
		}
		return c.memory, nil
	}
	st := &accountState{}
	b, err := os.ReadFile(filepath.Join(c.StateDir, "account.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	return st, json.Unmarshal(b, st)
}

func (c *Cloud) save(st *accountState) error {
	if c.StateDir == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// Written aside, then renamed over: another process never reads half a file.
	tmp := filepath.Join(c.StateDir, "account.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.StateDir, "account.json"))
}

// refuse is how AWS refuses a create that the account's state forbids: a queue name deleted
// less than a minute ago, a second EC2 Spot service-linked role.
func (c *Cloud) refuse(typ string, r res, preview bool) error {
	if preview {
		return nil
	}
	st, err := c.read()
	if err != nil {
		return err
	}
	switch typ {
	case "aws:sqs/queue:Queue":
		name := r.physical("name")
		if at, ok := st.DeletedQueues[name]; ok && time.Since(at) < QueueNameReuse {
			return fmt.Errorf("creating SQS queue %s: QueueDeletedRecently: You must wait 60 seconds after deleting a queue before you can create another queue with the same name", name)
		}
	case "aws:iam/serviceLinkedRole:ServiceLinkedRole":
		if c.SpotRoleExists || st.SpotRole {
			return fmt.Errorf("creating IAM service-linked role: InvalidInput: Service role name AWSServiceRoleForEC2Spot has been taken in this account, please try a different suffix")
		}
	}
	return nil
}

// created records what AWS remembers of a new resource.
func (c *Cloud) created(typ, id string, outputs resource.PropertyMap) error {
	switch typ {
	case nodeGroupType:
		return c.update(func(st *accountState) {
			if st.NodeGroups == nil {
				st.NodeGroups = map[string]NodeGroup{}
			}
			st.NodeGroups[id] = nodeGroupOf(outputs)
		})
	case clusterType:
		return c.update(func(st *accountState) {
			st.Clusters = append(st.Clusters, str(outputs["name"]))
			if st.ClusterVersions == nil {
				st.ClusterVersions = map[string]string{}
			}
			st.ClusterVersions[str(outputs["name"])] = str(outputs["version"])
		})
	case "aws:iam/serviceLinkedRole:ServiceLinkedRole", "aws:ec2/subnet:Subnet":
	default:
		return nil
	}
	tags := map[string]string{}
	if m, ok := outputs["tags"].Mappable().(map[string]any); ok {
		for k, v := range m {
			tags[k] = fmt.Sprint(v)
		}
	}
	return c.update(func(st *accountState) {
		switch typ {
		case "aws:iam/serviceLinkedRole:ServiceLinkedRole":
			st.SpotRole = true
		case "aws:ec2/subnet:Subnet":
			if st.Subnets == nil {
				st.Subnets = map[string]Subnet{}
			}
			st.Subnets[id] = Subnet{AZ: str(outputs["availabilityZone"]), AZID: str(outputs["availabilityZoneId"]), Tags: tags}
		}
	})
}

// Delete records what AWS remembers of a deleted resource.
func (c *Cloud) Delete(typ, id string, outputs resource.PropertyMap) error {
	if typ != "aws:sqs/queue:Queue" && typ != "aws:ec2/subnet:Subnet" && typ != nodeGroupType && typ != clusterType {
		return nil
	}
	return c.update(func(st *accountState) {
		switch typ {
		case "aws:sqs/queue:Queue":
			if st.DeletedQueues == nil {
				st.DeletedQueues = map[string]time.Time{}
			}
			st.DeletedQueues[str(outputs["name"])] = time.Now()
		case "aws:ec2/subnet:Subnet":
			delete(st.Subnets, id)
		case nodeGroupType:
			delete(st.NodeGroups, id)
		case clusterType:
			st.Clusters = slices.DeleteFunc(st.Clusters, func(n string) bool { return n == str(outputs["name"]) })
		}
	})
}

// versionSkew is how EKS refuses a version change that breaks its skew rules (Amazon EKS
// user guide, awsdocs/amazon-eks-user-guide at 4d52b4d: update-managed-node-group.adoc:45
// "The version that you update to can't be greater than the control plane's version";
// update-cluster.adoc:102, one minor version at a time; :105-106, a kubelet of 1.25 or later
// may be up to three minor versions older than the control plane, so an update that would
// leave a managed node group four behind is refused — :63 asks for the nodes to be level
// first, which the guide's later lines relax). typ's resource goes from olds (nil for a
// create) to news.
func (c *Cloud) versionSkew(typ string, olds, news resource.PropertyMap) error {
	if typ != clusterType && typ != nodeGroupType {
		return nil
	}
	st, err := c.read()
	if err != nil {
		return err
	}
	switch typ {
	case nodeGroupType:
		cluster, v := str(news["clusterName"]), str(news["version"])
		if cv := st.ClusterVersions[cluster]; v != "" && cv != "" && minorOf(v) > minorOf(cv) {
			return fmt.Errorf("updating EKS node group %s: InvalidParameterException: Requested Nodegroup Kubernetes version %s is newer than the cluster's, %s", str(news["nodeGroupName"]), v, cv)
		}
	case clusterType:
		if olds == nil {
			return nil
		}
		from, to := str(olds["version"]), str(news["version"])
		if from == "" || to == "" || from == to {
			return nil
		}
		if minorOf(to) != minorOf(from)+1 {
			return fmt.Errorf("updating EKS cluster %s: InvalidParameterException: Unsupported Kubernetes minor version update from %s to %s", str(news["name"]), from, to)
		}
		for _, ng := range st.NodeGroups {
			if ng.Cluster != str(news["name"]) {
				continue
			}
			if v, _ := ng.Launched["version"].(string); v != "" && minorOf(to)-minorOf(v) > 3 {
				return fmt.Errorf("updating EKS cluster %s: InvalidParameterException: Nodegroup %s is at %s, more than three minor versions behind %s", str(news["name"]), ng.Name, v, to)
			}
		}
	}
	return nil
}

// versionChanged records an EKS cluster's new version.
func (c *Cloud) versionChanged(typ string, outputs resource.PropertyMap) error {
	if typ != clusterType {
		return nil
	}
	return c.update(func(st *accountState) {
		if st.ClusterVersions == nil {
			st.ClusterVersions = map[string]string{}
		}
		st.ClusterVersions[str(outputs["name"])] = str(outputs["version"])
	})
}

// minorOf is a "1.<minor>" Kubernetes version's minor number (-1 if it is none).
func minorOf(v string) int {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return -1
	}
	return minor
}

// spotRoleExists tells whether the account has the EC2 Spot service-linked role.
func (c *Cloud) spotRoleExists() bool {
	st, err := c.read()
	return c.SpotRoleExists || (err == nil && st.SpotRole)
}
