// The ES module entry point: the CommonJS build re-exported, so that
// `import` and `require` share one copy of every class (an error thrown
// by one is `instanceof` the other's class).
import cjs from "../dist/index.cjs";

export const {
  Store,
  event,
  uuid7,
  operations,
  fromNative,
  SessionError,
  NotFoundError,
  AlreadyExistsError,
  ExpiredError,
  SessionEndedError,
  QuotaExceededError,
  ConflictError,
  InvalidInputError,
  UnsupportedError,
  BackendError,
  SerializationError,
  UnavailableError,
  EncryptionError,
  UnauthorizedError,
} = cjs;
