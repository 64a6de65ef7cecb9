package store

import (
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func epoch(sec int64) events.SecondsEpochTime {
	return events.SecondsEpochTime{Time: time.Unix(sec, 0).UTC()}
}
