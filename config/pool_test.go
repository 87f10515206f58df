package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/config"
)

// Only a container-form pool keeps a runner waiting (it holds no GPU); its twin, which runs
// seldom, does not, nor does a runner-form pool, whose runner would hold a GPU node.
func TestIdleRunners(t *testing.T) {
	container := config.DefaultPool()
	container.JobForm = config.JobFormContainer
	assert.Equal(t, 1, container.IdleRunners())
	assert.Equal(t, 0, container.RetryTwin().IdleRunners())
	assert.Equal(t, 0, config.DefaultPool().IdleRunners())
}
