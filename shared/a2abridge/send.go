package a2abridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/registry"
)

// The states a stored Task can be in: every Task the bridge answers is
// terminal, as an invocation is one request and one answer.
const (
	stateCompleted = "completed"
	stateFailed    = "failed"
)

// maxReason bounds the provider's words quoted in a failed Task's reason.
const maxReason = 500

// invocation is what one A2A message asks of the provider.
type invocation struct {
	Task  string
	Input json.RawMessage
}

// invocationOf reads the invocation from msg: its first data part must be
// {"task": string, "input"?: object or null} and nothing else; without a
// data part, its first text part is input.text for the provider's first
// capability.
func invocationOf(agent registry.Agent, msg *a2a.Message) (invocation, *rpcError) {
	for _, p := range msg.Parts {
		if p == nil {
			continue
		}
		if _, ok := p.Content.(a2a.Data); !ok {
			continue
		}
		obj, ok := p.Data().(map[string]any)
		if !ok {
			return invocation{}, newError(codeInvalidParams, `the data part must be an object {"task": "<capability>", "input": {...}}`)
		}
		for k := range obj {
			if k != "task" && k != "input" {
				return invocation{}, newError(codeInvalidParams, "the data part has "+quote(k)+`: it holds only "task" and "input"`)
			}
		}
		task, ok := obj["task"].(string)
		if !ok || task == "" {
			return invocation{}, newError(codeInvalidParams, `the data part's "task" must be a non-empty string naming a capability`)
		}
		inv := invocation{Task: task, Input: json.RawMessage("{}")}
		switch in := obj["input"].(type) {
		case nil:
		case map[string]any:
			raw, err := json.Marshal(in)
			if err != nil {
				return invocation{}, newError(codeInvalidParams, `the data part's "input" cannot be encoded`)
			}
			inv.Input = raw
		default:
			return invocation{}, newError(codeInvalidParams, `the data part's "input" must be an object`)
		}
		return inv, nil
	}
	for _, p := range msg.Parts {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(a2a.Text); ok {
			if len(agent.Capabilities) == 0 {
				return invocation{}, newError(codeInvalidParams, "this agent advertises no capability a text part could go to")
			}
			raw, _ := json.Marshal(map[string]string{"text": string(t)})
			return invocation{Task: agent.Capabilities[0], Input: raw}, nil
		}
	}
	return invocation{}, newError(codeInvalidParams, `the message has no data part {"task", "input"} and no text part`)
}

// send serves SendMessage and SendStreamingMessage.
func (b *bridge) send(ctx context.Context, out *replier, agent registry.Agent, params json.RawMessage) {
	var p a2a.SendMessageRequest
	if err := json.Unmarshal(params, &p); err != nil {
		out.fail(newError(codeInvalidParams, "params are not a SendMessageRequest {message: {messageId, role, parts}}"))
		return
	}
	msg := p.Message
	switch {
	case msg == nil:
		out.fail(newError(codeInvalidParams, "params.message is required"))
		return
	case !protocol.ValidTaskID(msg.ID):
		out.fail(newError(codeInvalidParams, "message.messageId must be 1 to 255 printable ASCII characters: it is the provider's task id"))
		return
	case msg.Role != a2a.MessageRoleUser:
		out.fail(newError(codeInvalidParams, `message.role must be "ROLE_USER"`))
		return
	}
	if msg.TaskID != "" {
		// Every Task here is terminal, so no message continues one.
		if _, err := b.tasks.get(ctx, agent.Name, string(msg.TaskID)); err == nil {
			out.fail(newError(codeUnsupportedOp, "task "+quote(string(msg.TaskID))+" has ended; send a new message without taskId"))
		} else if errors.Is(err, errNoTask) {
			out.fail(newError(codeTaskNotFound, "no task "+quote(string(msg.TaskID))))
		} else {
			b.log.ErrorContext(ctx, "a2abridge: read task", "err", err.Error())
			out.fail(newError(codeInternalError, "internal error; try again later"))
		}
		return
	}
	inv, rerr := invocationOf(agent, msg)
	if rerr != nil {
		out.fail(rerr)
		return
	}
	contextID := msg.ContextID
	if contextID == "" {
		contextID = msg.ID
	}
	task := &a2a.Task{ID: a2a.TaskID(msg.ID), ContextID: contextID, History: []*a2a.Message{msg}}
	if out.streaming {
		now := b.now().UTC()
		working := *task
		working.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}
		out.event(a2a.StreamResponse{Event: &working})
	}
	rerr = b.invoke(ctx, agent, inv, msg.ID, task)
	if rerr != nil {
		out.fail(rerr)
		return
	}
	state := stateFailed
	if task.Status.State == a2a.TaskStateCompleted {
		state = stateCompleted
	}
	raw, err := json.Marshal(task)
	if err != nil {
		b.log.ErrorContext(ctx, "a2abridge: encode task", "err", err.Error())
		out.fail(newError(codeInternalError, "internal error; try again later"))
		return
	}
	stored, err := b.tasks.put(ctx, agent.Name, msg.ID, state, raw)
	if err != nil {
		b.log.ErrorContext(ctx, "a2abridge: store task", "err", err.Error())
		out.fail(newError(codeInternalError, "internal error; try again later"))
		return
	}
	if !out.streaming {
		out.result(json.RawMessage(`{"task":` + string(stored) + `}`))
		return
	}
	if !bytes.Equal(stored, raw) {
		// A completed Task was already there: it is what this message got.
		var kept a2a.Task
		if err := json.Unmarshal(stored, &kept); err == nil {
			task = &kept
		}
	}
	for _, art := range task.Artifacts {
		out.event(a2a.StreamResponse{Event: &a2a.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Artifact: art, LastChunk: true}})
	}
	out.event(a2a.StreamResponse{Event: &a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status, Metadata: task.Metadata}})
}

// invoke calls the provider and fills task with the outcome: completed
// with the output as its artifact, or failed with the reason. A 400 or 422
// the provider answered in the protocol's error shape is returned as
// invalid params instead.
func (b *bridge) invoke(ctx context.Context, agent registry.Agent, inv invocation, taskID string, task *a2a.Task) *rpcError {
	now := func() *a2a.TaskStatus { t := b.now().UTC(); return &a2a.TaskStatus{Timestamp: &t} }
	fail := func(reason string, detail map[string]any) *rpcError {
		st := now()
		st.State = a2a.TaskStateFailed
		parts := []*a2a.Part{a2a.NewTextPart(reason)}
		if detail != nil {
			parts = append(parts, a2a.NewDataPart(detail))
		}
		st.Message = &a2a.Message{ID: taskID + "/status", Role: a2a.MessageRoleAgent, TaskID: task.ID, ContextID: task.ContextID, Parts: parts}
		task.Status = *st
		task.Metadata = map[string]any{"agent": agent.Name, "capability": inv.Task}
		return nil
	}
	if _, err := egress.ValidateURL(agent.Endpoint, b.egress); err != nil {
		return fail("the provider's registered endpoint is not one the network calls (egress policy)", nil)
	}
	res, err := b.client.Invoke(ctx, agent.Endpoint, protocol.Request{Task: inv.Task, Input: inv.Input}, protocol.WithTaskID(taskID))
	if res == nil {
		return fail(unreachable(err), nil)
	}
	if res.Truncated {
		return fail("the provider's answer is larger than the bridge accepts", map[string]any{"status": res.Status})
	}
	verr := protocol.Verify(res.Status, res.Header, res.Body, protocol.Expect{Agent: agent.Name, Capability: inv.Task})
	if verr != nil {
		return fail("the provider's answer failed the protocol verifier: "+clip(verr.Error()), map[string]any{"status": res.Status})
	}
	if res.Status != http.StatusOK {
		detail := map[string]any{"status": res.Status}
		if res.Error != nil {
			detail["error"] = string(res.Error.Error)
			detail["message"] = clip(res.Error.Message)
			if len(res.Error.Details) > 0 {
				detail["details"] = res.Error.Details
			}
		}
		if res.Status == http.StatusBadRequest || res.Status == http.StatusUnprocessableEntity {
			return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("the provider refused the input: %v", detail["message"]), Details: detail}
		}
		return fail(fmt.Sprintf("the provider answered %d %v: %v", res.Status, detail["error"], detail["message"]), detail)
	}
	var body struct {
		Output   json.RawMessage `json:"output"`
		Metadata json.RawMessage `json:"metadata"`
	}
	var output any
	var meta map[string]any
	if json.Unmarshal(res.Body, &body) != nil || decodeNumbers(body.Output, &output) != nil || decodeNumbers(body.Metadata, &meta) != nil {
		return fail("the provider's answer could not be read", map[string]any{"status": res.Status})
	}
	st := now()
	st.State = a2a.TaskStateCompleted
	task.Status = *st
	task.Artifacts = []*a2a.Artifact{{ID: "output", Name: "output", Parts: a2a.ContentParts{a2a.NewDataPart(output)}, Metadata: meta}}
	task.Metadata = map[string]any{"agent": agent.Name, "capability": inv.Task, "replayed": res.Replayed}
	return nil
}

// decodeNumbers decodes raw keeping numbers as written (json.Number), so
// an output's integers reach the client digit for digit.
func decodeNumbers(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// unreachable says why no answer came, in words that leak nothing of the
// network's insides.
func unreachable(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, egress.ErrBlocked):
		return "the provider's endpoint resolves to an address the network does not call (egress policy)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "the provider did not answer in time"
	}
	return "the provider could not be reached"
}

func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason], "") + "…"
}

// getTask serves GetTask: the stored Task, its history cut to
// historyLength when that is given.
func (b *bridge) getTask(ctx context.Context, out *replier, agent registry.Agent, params json.RawMessage) {
	var p a2a.GetTaskRequest
	if err := json.Unmarshal(params, &p); err != nil || p.ID == "" {
		out.fail(newError(codeInvalidParams, "params must be {id, historyLength?} with a non-empty id"))
		return
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		out.fail(newError(codeInvalidParams, "historyLength must be 0 or more"))
		return
	}
	raw, ok := b.lookup(ctx, out, agent, string(p.ID))
	if !ok {
		return
	}
	if p.HistoryLength != nil {
		var t map[string]json.RawMessage
		if err := json.Unmarshal(raw, &t); err == nil {
			var hist []json.RawMessage
			_ = json.Unmarshal(t["history"], &hist)
			if n := *p.HistoryLength; n < len(hist) {
				hist = hist[len(hist)-n:]
			}
			if len(hist) == 0 {
				delete(t, "history")
			} else {
				t["history"], _ = json.Marshal(hist)
			}
			raw, _ = json.Marshal(t)
		}
	}
	out.result(raw)
}

// cancelTask serves CancelTask: every Task has ended, so none can be
// canceled; an unknown one is not found.
func (b *bridge) cancelTask(ctx context.Context, out *replier, agent registry.Agent, params json.RawMessage) {
	var p a2a.CancelTaskRequest
	if err := json.Unmarshal(params, &p); err != nil || p.ID == "" {
		out.fail(newError(codeInvalidParams, "params must be {id} with a non-empty id"))
		return
	}
	if _, ok := b.lookup(ctx, out, agent, string(p.ID)); !ok {
		return
	}
	out.fail(newError(codeTaskNotCancelable, "task "+quote(string(p.ID))+" has ended: an A2AWire invocation is one request and one answer, so no task can be canceled"))
}

// lookup reads a stored Task, answering the error itself when there is
// none.
func (b *bridge) lookup(ctx context.Context, out *replier, agent registry.Agent, id string) (json.RawMessage, bool) {
	raw, err := b.tasks.get(ctx, agent.Name, id)
	switch {
	case errors.Is(err, errNoTask):
		out.fail(newError(codeTaskNotFound, "no task "+quote(id)))
		return nil, false
	case err != nil:
		b.log.ErrorContext(ctx, "a2abridge: read task", "err", err.Error())
		out.fail(newError(codeInternalError, "internal error; try again later"))
		return nil, false
	}
	return raw, true
}
