// Being written (issue 22): satellite tests.
