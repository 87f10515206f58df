package iamjudge_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/iamjudge"
)

// The evaluator answers as AWS's logic does on a policy it did not see before: an Allow, an
// explicit Deny over it, a boundary that caps it, and a resource outside the Allow.
func TestTheEvaluatorJudges(t *testing.T) {
	const acct = "123456789012"
	policy := json.RawMessage(`{"Version": "2012-10-17", "Statement": [
		{"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"},
		{"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::b/keep/*"}]}`)
	boundary := json.RawMessage(`{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "NotAction": "s3:PutObject", "Resource": "*"}]}`)
	who := "arn:aws:iam::" + acct + ":role/r"
	v := iamjudge.Judge(t, []iamjudge.Case{
		{Name: "read", Principal: who, Action: "s3:GetObject", Resource: "arn:aws:s3:::b/x", Account: acct, Identity: []json.RawMessage{policy}},
		{Name: "delete kept", Principal: who, Action: "s3:DeleteObject", Resource: "arn:aws:s3:::b/keep/x", Account: acct, Identity: []json.RawMessage{policy}},
		{Name: "other bucket", Principal: who, Action: "s3:GetObject", Resource: "arn:aws:s3:::c/x", Account: acct, Identity: []json.RawMessage{policy}},
		{Name: "write, bounded", Principal: who, Action: "s3:PutObject", Resource: "arn:aws:s3:::b/x", Account: acct, Identity: []json.RawMessage{policy}, Boundary: []json.RawMessage{boundary}},
	})
	assert.Equal(t, map[string]iamjudge.Verdict{
		"read": iamjudge.Allowed, "delete kept": iamjudge.ExplicitlyDenied, "other bucket": iamjudge.ImplicitlyDenied, "write, bounded": iamjudge.ImplicitlyDenied,
	}, v)
}
