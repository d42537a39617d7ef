/**
 * OpenAI's error shape, `{ error: { message, type, param, code } }`, with its status codes, so OpenAI clients show
 * our sentences and retry (or not) as they do against OpenAI.
 */

/** `error.type` values OpenAI uses. */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error';

/** An error that becomes one HTTP response. */
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 413 | 429 | 500 | 503,
    message: string,
    readonly type: ApiErrorType = 'invalid_request_error',
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }

  get body(): { error: { message: string; type: ApiErrorType; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A request the client got wrong (400), naming the parameter. */
export function invalidParam(
  param: string,
  message: string,
  code: string | null = 'invalid_value',
): ApiError {
  return new ApiError(400, message, 'invalid_request_error', param, code);
}
