package fakeaws

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	return os.WriteFile(filepath.Join(c.StateDir, "account.json"), b, 0o644)
}

// refuse is how AWS refuses a create that the account's state forbids: a queue name deleted
// less than a minute ago, a second EC2 Spot service-linked role.
func (c *Cloud) refuse(typ string, r res, preview bool) error {
	if preview {
		return nil
	}
	st, err := c.load()
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
func (c *Cloud) created(typ string) error {
	if typ != "aws:iam/serviceLinkedRole:ServiceLinkedRole" {
		return nil
	}
	st, err := c.load()
	if err != nil {
		return err
	}
	st.SpotRole = true
	return c.save(st)
}

// Delete records what AWS remembers of a deleted resource.
func (c *Cloud) Delete(typ string, outputs resource.PropertyMap) error {
	if typ != "aws:sqs/queue:Queue" {
		return nil
	}
	st, err := c.load()
	if err != nil {
		return err
	}
	if st.DeletedQueues == nil {
		st.DeletedQueues = map[string]time.Time{}
	}
	st.DeletedQueues[str(outputs["name"])] = time.Now()
	return c.save(st)
}

// spotRoleExists tells whether the account has the EC2 Spot service-linked role.
func (c *Cloud) spotRoleExists() bool {
	st, err := c.load()
	return c.SpotRoleExists || (err == nil && st.SpotRole)
}
