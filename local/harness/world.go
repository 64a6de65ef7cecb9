package harness

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
	"github.com/aws/aws-lambda-go/events"
)

// LobbyWorld is the world the harness creates at start, owned by the
// network key.
const LobbyWorld = "lobby"

// worldEntry builds the entry of the world function name over st, with
// the dependencies its main builds from the environment (worldDeps), each
// function its own as each Lambda has. A handler that cannot be built answers every invocation
// with the error, as a Lambda whose init failed.
func worldEntry(o Options, st store.Store, name string) any {
	h, err := worldHandler(name, worldDeps(o, st), func() (worldhttp.Prober, error) {
		// world-ping probes webhooks as the dispatcher delivers to them:
		// http and loopback allowed here, signed with the network key.
		return localDispatcher(o, st)
	})
	if err != nil {
		return func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return lambdahttp.Entry(h)
}

// worldHandler calls the constructor functions/<name>/main.go calls;
// prober builds world-ping's live probe.
func worldHandler(name string, d worldhttp.Deps, prober func() (worldhttp.Prober, error)) (http.Handler, error) {
	o, w := d.Options, d.World
	switch name {
	case worldhttp.FunctionPut:
		return worldhttp.NewPut(o, w)
	case worldhttp.FunctionGet:
		return worldhttp.NewGet(o, w)
	case worldhttp.FunctionJoin:
		return worldhttp.NewJoin(o, w)
	case worldhttp.FunctionLeave:
		return worldhttp.NewLeave(o, w)
	case worldhttp.FunctionAgents:
		return worldhttp.NewAgents(o, w, world.Presence)
	case worldhttp.FunctionSend:
		return worldhttp.NewSend(o, inbox.New(d.Store))
	case worldhttp.FunctionMessages:
		return worldhttp.NewMessages(o, inbox.New(d.Store))
	case worldhttp.FunctionPing:
		p, err := prober()
		if err != nil {
			return nil, err
		}
		return worldhttp.NewPing(o, w, p)
	case worldhttp.FunctionAct:
		return worldhttp.NewAct(o, w)
	case worldhttp.FunctionEvents:
		return worldhttp.NewEvents(o, w)
	case worldhttp.FunctionCard:
		return worldhttp.NewCard(o, w)
	}
	return nil, fmt.Errorf("harness: no world function %q", name)
}

// SeedLobby creates the world lobby in st owned by key's public half (the
// network key), or leaves it as it is when it exists: what `go run ./local`
// does at start, next to SeedFixtures. It is idempotent over restarts on a
// kept store; a lobby owned by another key is an error saying so.
func SeedLobby(ctx context.Context, st store.Store, key ed25519.PrivateKey) (m world.Manifest, created bool, err error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(key) != ed25519.PrivateKeySize {
		return world.Manifest{}, false, errors.New("seed lobby: the network key is not an Ed25519 private key")
	}
	w := world.New(st)
	m, err = w.GetWorld(ctx, LobbyWorld)
	switch {
	case err == nil:
		if !m.OwnerKey.Equal(pub) {
			return m, false, fmt.Errorf("seed lobby: world %s is owned by key %s, not the network key", LobbyWorld, m.OwnerKeyID)
		}
		return m, false, nil
	case apierror.KindOf(err) != apierror.NotFound:
		return world.Manifest{}, false, fmt.Errorf("seed lobby: %w", err)
	}
	m, created, err = w.PutWorld(ctx, world.Manifest{
		ID:          LobbyWorld,
		Name:        "Lobby",
		Description: "The network's open world: join it to find other agents, message them and ping them.",
		Category:    "social",
	}, pub)
	if err != nil {
		return world.Manifest{}, false, fmt.Errorf("seed lobby: %w", err)
	}
	return m, created, nil
}
