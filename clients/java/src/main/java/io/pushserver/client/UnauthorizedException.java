package io.pushserver.client;

/** 401: the publish key or subscribe token is missing, wrong or expired. */
public class UnauthorizedException extends PushException {
    private static final long serialVersionUID = 1L;

    public UnauthorizedException(String code, String serverMessage) {
        super(401, code, serverMessage, -1);
    }
}
