package live

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// CoolDowns holds and releases the stack's cool-down NodePools (nodepools.CoolDownNodePoolFor) as
// the in-cluster retrier: its account may get and patch those NodePools, by name, and no
// other (k8s.CoolDownRules). A hold raises a cool-down NodePool's GPU limit from 0 to the
// pool's (the program's CoolDownGPULimitAnnotation) and records its end
// (CoolDownUntilAnnotation); a release sets it back to 0. The pool's own NodePool is never
// written: the program owns its limit, and an up would conflict with another writer
// (docs/design.md). Both are merge patches under the retrier's own field manager.
type CoolDowns struct {
	Dynamic dynamic.Interface
	// NodePools are the stack's cool-down NodePools, which Release looks at.
	NodePools []string
}

// coolDownManager is the field manager the retrier's patches carry.
const coolDownManager = "gpuci-retrier"

// Hold keeps name launching on-demand nodes until until, or until a later end it already has.
func (c CoolDowns) Hold(ctx context.Context, name string, until time.Time) error {
	np, err := c.Dynamic.Resource(wellknown.NodePools).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading NodePool %s: %w", name, err)
	}
	notes := np.GetAnnotations()
	limit := notes[wellknown.CoolDownGPULimitAnnotation]
	if limit == "" {
		return fmt.Errorf("NodePool %s has no %s: not a cool-down NodePool of the stack's", name, wellknown.CoolDownGPULimitAnnotation)
	}
	if held, err := time.Parse(time.RFC3339, notes[wellknown.CoolDownUntilAnnotation]); err == nil && held.After(until) {
		until = held
	}
	return c.patch(ctx, name, until.UTC().Format(time.RFC3339), limit)
}

// Release ends every hold whose end is not after now (or cannot be read), and names the
// NodePools it ended.
func (c CoolDowns) Release(ctx context.Context, now time.Time) ([]string, error) {
	var ended []string
	for _, name := range c.NodePools {
		np, err := c.Dynamic.Resource(wellknown.NodePools).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ended, fmt.Errorf("reading NodePool %s: %w", name, err)
		}
		at, held := np.GetAnnotations()[wellknown.CoolDownUntilAnnotation]
		if !held {
			continue
		}
		if until, err := time.Parse(time.RFC3339, at); err == nil && until.After(now) {
			continue
		}
		if err := c.patch(ctx, name, nil, "0"); err != nil {
			return ended, err
		}
		ended = append(ended, name)
	}
	return ended, nil
}

// patch sets a cool-down NodePool's GPU limit and its until annotation (nil removes it).
func (c CoolDowns) patch(ctx context.Context, name string, until any, limit string) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{wellknown.CoolDownUntilAnnotation: until}},
		"spec":     map[string]any{"limits": map[string]any{wellknown.GPUResource: limit}},
	})
	if err != nil {
		return err
	}
	if _, err := c.Dynamic.Resource(wellknown.NodePools).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: coolDownManager}); err != nil {
		return fmt.Errorf("patching NodePool %s's limit to %s: %w", name, limit, err)
	}
	return nil
}
