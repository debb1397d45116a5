"""Python skills of the mapping test project."""


def produce(input):
    return input["value"]


def show(input):
    return input
