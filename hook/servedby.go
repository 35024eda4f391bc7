package hook

// ServedByKey is the model.LLMResponse.CustomMetadata key under which a
// response names the model that answered it, as a string (its Name(), what
// pricing looks up), when that is not the agent's own model: a fallback's
// response (models.Fallback), or a switched model's (models.Switch). A
// response without it came from the model the agent was given. The
// guards price it, and the metrics label it, by this name.
const ServedByKey = "served_by"
