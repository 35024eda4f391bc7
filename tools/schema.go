package tools

import (
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemas holds, by Go type, the JSON schema of a built-in tool's
// arguments or result, inferred once and shared by every agent's tool
// (a *jsonschema.Schema is only read after it is built: ADK resolves it
// per tool without changing it). Inferring them per agent cost about 19 KB
// of heap an agent.
var schemas sync.Map // reflect.Type → *jsonschema.Schema

// schemaOf is the shared schema of T, or nil if it cannot be inferred
// (functiontool.New then infers it and reports why).
func schemaOf[T any]() *jsonschema.Schema {
	t := reflect.TypeFor[T]()
	if s, ok := schemas.Load(t); ok {
		return s.(*jsonschema.Schema)
	}
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil
	}
	actual, _ := schemas.LoadOrStore(t, s)
	return actual.(*jsonschema.Schema)
}
