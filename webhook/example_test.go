package webhook_test

import (
	"fmt"

	"github.com/agent-worker/agent-worker/webhook"
)

// A CI system's body rendered by a webhook's text template: numbers stay
// as written, json and join show parts of the body, and a key the body
// lacks is an error (the API answers it 422).
func Example() {
	t, err := webhook.Parse("webhooks.ci.text", `{{.repository}}: build {{.build}} {{.status}} on {{join .runners ", "}} {{json .labels}}`)
	if err != nil {
		panic(err)
	}
	body, err := webhook.Decode([]byte(`{"repository": "payments", "build": 12345678901, "status": "failed",
		"runners": ["linux", "arm64"], "labels": {"team": "payments"}}`))
	if err != nil {
		panic(err)
	}
	text, err := t.Render(body)
	fmt.Println(text, err)

	missing, _ := webhook.Parse("webhooks.ci.id", "{{.repository}}-{{.build_id}}")
	_, err = missing.Render(body)
	fmt.Println(err)

	_, err = webhook.Decode([]byte(`{"a": 1} trailing`))
	fmt.Println(err)
	// Output:
	// payments: build 12345678901 failed on linux, arm64 {"team":"payments"} <nil>
	// template: webhooks.ci.id:1:18: executing "webhooks.ci.id" at <.build_id>: map has no entry for key "build_id"
	// the body is not one JSON value: something follows the first JSON value
}
