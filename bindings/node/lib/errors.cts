/**
 * The store's errors as JavaScript errors, one class per error kind.
 *
 * Every class extends {@link SessionError}; `kind` names the kind and
 * `problem` holds the problem document of the HTTP API (`docs/server.md`).
 */

/** The problem document of an error, as the HTTP API answers it. */
export interface Problem {
  /** A URI naming the kind: `urn:agent-session:problem:<kind>`. */
  type?: string;
  /** The kind in words ("Not found"). */
  title?: string;
  /** The HTTP status the kind maps to. */
  status?: number;
  /** The error's message with its causes. */
  detail?: string;
  /** The kind, snake case (`not_found`, `conflict`, ...). */
  kind?: string;
  /** Further fields of the kind (the session, the field, the versions...). */
  [field: string]: unknown;
}

/** A store error: `kind` names it, `problem` holds its fields. */
export class SessionError extends Error {
  /** The error's kind (`not_found`, `conflict`, ...). */
  readonly kind: string = "backend";
  /** The problem document: the kind's fields (`session_id`, `field`, ...). */
  readonly problem: Problem;

  constructor(message: string, problem: Problem = {}) {
    super(message);
    this.problem = problem;
    this.name = new.target.name;
  }

  /** The error's message with its causes. */
  get detail(): string {
    return typeof this.problem.detail === "string" ? this.problem.detail : this.message;
  }
}

/** The session does not exist, or belongs to another owner. */
export class NotFoundError extends SessionError {
  override readonly kind = "not_found";
}
/** A session or event with that id exists already. */
export class AlreadyExistsError extends SessionError {
  override readonly kind = "already_exists";
}
/** The session has expired. */
export class ExpiredError extends SessionError {
  override readonly kind = "expired";
}
/** The session was ended: readable, closed to writes until reopened. */
export class SessionEndedError extends SessionError {
  override readonly kind = "session_ended";
}
/** A limit of the store was reached (events per session, bytes...). */
export class QuotaExceededError extends SessionError {
  override readonly kind = "quota_exceeded";
}
/** A compare-and-swap lost: the session moved past the expected version. */
export class ConflictError extends SessionError {
  override readonly kind = "conflict";
}
/** The call's input is invalid; `problem.field` names the field when known. */
export class InvalidInputError extends SessionError {
  override readonly kind = "invalid_input";
}
/** The store cannot do this (a capability it lacks). */
export class UnsupportedError extends SessionError {
  override readonly kind = "unsupported";
}
/** The engine failed. */
export class BackendError extends SessionError {
  override readonly kind = "backend";
}
/** Stored or given data could not be encoded or decoded. */
export class SerializationError extends SessionError {
  override readonly kind = "serialization";
}
/** The engine is unreachable or the store is closed; the call may succeed later. */
export class UnavailableError extends SessionError {
  override readonly kind = "unavailable";
}
/** Encryption at rest failed (a wrong or missing key). */
export class EncryptionError extends SessionError {
  override readonly kind = "encryption";
}
/** The server refused the credentials. */
export class UnauthorizedError extends SessionError {
  override readonly kind = "unauthorized";
}

const BY_KIND: Record<string, new (message: string, problem: Problem) => SessionError> = {
  not_found: NotFoundError,
  already_exists: AlreadyExistsError,
  expired: ExpiredError,
  session_ended: SessionEndedError,
  quota_exceeded: QuotaExceededError,
  conflict: ConflictError,
  invalid_input: InvalidInputError,
  unsupported: UnsupportedError,
  backend: BackendError,
  serialization: SerializationError,
  unavailable: UnavailableError,
  encryption: EncryptionError,
  unauthorized: UnauthorizedError,
};

/** The class of a native rejection (its message is the problem as JSON). */
export function fromNative(error: unknown): Error {
  if (!(error instanceof Error)) {
    return new BackendError(String(error));
  }
  let problem: Problem;
  try {
    problem = JSON.parse(error.message) as Problem;
  } catch {
    // Not a store error (a wrong argument type caught by the addon).
    return error;
  }
  if (problem === null || typeof problem !== "object") {
    return error;
  }
  const cls = (typeof problem.kind === "string" && BY_KIND[problem.kind]) || BackendError;
  return new cls(typeof problem.detail === "string" ? problem.detail : error.message, problem);
}
