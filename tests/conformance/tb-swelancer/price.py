def format_price(amount):
    return "$" + str(amount)
