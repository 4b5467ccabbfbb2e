 ñÂ±4‚X
V
defaultKarn:aws:kms:eu-west-1:111122223333:key/0b2f6f7a-1c2d-4e5f-8a9b-0c1d2e3f4a5b